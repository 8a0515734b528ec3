"""Online first on a shared device: offline work steps aside while online work runs.

An offline solve (seconds of LNS iterations) shares the solver replica with online dispatch
rounds. Each online call holds ``online()`` while it computes; the offline solve calls
``yield_to_online()`` between iterations, which waits while any online call is held and says
how long it waited (the solve does not count that against its time limit). Threads, not
asyncio: the calls compute in worker threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class PriorityGate:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._cond = threading.Condition()
        self._online = 0
        self.yields = 0  # times an offline step waited
        self.yielded_s = 0.0

    @contextmanager
    def online(self) -> Iterator[None]:
        with self._cond:
            self._online += 1
        try:
            yield
        finally:
            with self._cond:
                self._online -= 1
                if self._online == 0:
                    self._cond.notify_all()

    @property
    def online_active(self) -> int:
        return self._online

    def yield_to_online(self, max_wait_s: float = 60.0) -> float:
        """Block while online work runs (at most ``max_wait_s``); seconds waited."""
        with self._cond:
            if self._online == 0:
                return 0.0
            start = self.clock()
            self._cond.wait_for(lambda: self._online == 0, timeout=max_wait_s)
            waited = self.clock() - start
            self.yields += 1
            self.yielded_s += waited
            return waited
