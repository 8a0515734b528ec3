"""Busy: the share of a sliding window a worker spent working (inside device calls).

HighService's control signal: Busy = 1 means no free worker and, held with no call finishing,
a stuck service. Overlapping calls count once (the device is busy, not twice busy). Pure: times
come from an injected clock (monotonic seconds).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class BusyTracker:
    """window_s : the sliding window, seconds. Thread-safe (device calls run in threads)."""

    def __init__(self, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        if window_s <= 0:
            raise ValueError(f"window_s must be > 0, got {window_s}")
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._periods: deque[tuple[float, float]] = deque()  # closed busy periods (start, end)
        self._closed_s = 0.0  # their total length: a full-window query is O(1), not O(calls)
        self._active = 0
        self._since: float | None = None  # start of the open busy period
        self.completed = 0
        self.last_completion: float | None = None
        self._born = clock()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Count the enclosed call as work."""
        self.begin()
        try:
            yield
        finally:
            self.end()

    def begin(self) -> None:
        with self._lock:
            if self._active == 0:
                self._since = self.clock()
            self._active += 1

    def end(self) -> None:
        with self._lock:
            self._active -= 1
            now = self.clock()
            self.completed += 1
            self.last_completion = now
            if self._active == 0 and self._since is not None:
                self._periods.append((self._since, now))
                self._closed_s += now - self._since
                self._since = None
            self._prune(now)

    def busy(self, window_s: float | None = None) -> float:
        """Busy share of the last ``window_s`` (default and at most the tracker's window; of the
        time since start, if younger), 0..1."""
        window = self.window_s if window_s is None else min(window_s, self.window_s)
        with self._lock:
            if not self._active and not self._periods:
                return 0.0  # idle the whole window: what a simulated fleet asks most often
            now = self.clock()
            self._prune(now)
            start = max(now - window, self._born)
            span = now - start
            if span <= 0:
                return 1.0 if self._active else 0.0
            if window >= self.window_s:
                # Pruned to the window: only the oldest period can start before it.
                busy = self._closed_s
                for s, e in self._periods:
                    if s >= start:
                        break
                    busy -= min(e, start) - s
            else:  # newest first, as far back as the window reaches
                busy = 0.0
                for s, e in reversed(self._periods):
                    if e <= start:
                        break
                    busy += e - max(s, start)
            if self._since is not None:
                busy += now - max(self._since, start)
            return max(0.0, min(1.0, busy / span))

    def stuck(self, after_s: float) -> bool:
        """Busy the whole time and no call finished for ``after_s`` seconds (an alarm)."""
        with self._lock:
            now = self.clock()
            if self._active == 0 or self._since is None:
                return False
            last = self.last_completion if self.last_completion is not None else self._since
            return now - max(last, self._since) >= after_s and now - self._since >= after_s

    def _prune(self, now: float) -> None:
        while self._periods and self._periods[0][1] < now - self.window_s:
            s, e = self._periods.popleft()
            self._closed_s -= e - s
        if not self._periods:
            self._closed_s = 0.0  # no drift from the running sum
