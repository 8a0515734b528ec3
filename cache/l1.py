"""L1: an in-process cache bounded by bytes, with per-entry TTL.

Two policies (``bench/cache.py`` compares them on Zipf traces):

* ``lru``: least recently used goes first.
* ``tinylfu``: W-TinyLFU-style. New entries enter a small LRU window (1% of the bytes); an
  entry leaving the window joins the main LRU only if a count-min sketch says it has been asked
  for more often than the main area's eviction victim. One-hit wonders cannot push out hot keys.
"""

from __future__ import annotations

import time
import zlib
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

_OVERHEAD = 96  # bytes per entry for the key object, tuple and dict slot (CPython, approx.)


class _Sketch:
    """Count-min sketch (4 rows) with periodic halving, so old popularity fades."""

    def __init__(self, width: int) -> None:
        self.width = max(64, width)
        self.table = np.zeros((4, self.width), np.uint16)
        self.seeds = (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F)
        self.added = 0

    def _cols(self, key: str) -> list[int]:
        # A stable hash: Python's str hash changes per process, which would make runs differ.
        h = zlib.crc32(key.encode())
        return [(((h ^ s) * 0x2545F491) >> 7) % self.width for s in self.seeds]

    def add(self, key: str) -> None:
        for row, col in enumerate(self._cols(key)):
            if self.table[row, col] < 65535:
                self.table[row, col] += 1
        self.added += 1
        if self.added >= 10 * self.width:
            self.table >>= 1
            self.added //= 2

    def estimate(self, key: str) -> int:
        return int(min(self.table[row, col] for row, col in enumerate(self._cols(key))))


class L1Cache:
    """max_bytes : bound on the bytes of keys + values + per-entry overhead.
    default_ttl_s : TTL when ``set`` gets none. clock : seconds, monotonic (tests pass a fake).
    """

    def __init__(
        self,
        max_bytes: int,
        default_ttl_s: float = 60.0,
        policy: str = "tinylfu",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if policy not in ("lru", "tinylfu"):
            raise ValueError(f"policy must be 'lru' or 'tinylfu', got {policy!r}")
        if max_bytes <= 0:
            raise ValueError("max_bytes must be > 0")
        self.max_bytes, self.default_ttl_s, self.policy, self.clock = (
            max_bytes,
            default_ttl_s,
            policy,
            clock,
        )
        self._main: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._window: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._bytes = 0
        self._window_bytes = 0
        self._window_max = max(1, max_bytes // 100) if policy == "tinylfu" else 0
        self._sketch = _Sketch(width=max(1024, max_bytes // 256)) if policy == "tinylfu" else None

    @staticmethod
    def _size(key: str, value: bytes) -> int:
        return len(key) + len(value) + _OVERHEAD

    @property
    def bytes_held(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._main) + len(self._window)

    def get(self, key: str) -> bytes | None:
        """The value, or None if absent or expired (an expired entry is dropped)."""
        if self._sketch is not None:
            self._sketch.add(key)
        for area in (self._window, self._main):
            hit = area.get(key)
            if hit is None:
                continue
            value, expires = hit
            if expires <= self.clock():
                self._drop(area, key)
                return None
            area.move_to_end(key)
            return value
        return None

    def set(self, key: str, value: bytes, ttl_s: float | None = None) -> None:
        """Store; an entry larger than the whole cache is not stored."""
        size = self._size(key, value)
        if size > self.max_bytes:
            return
        for area in (self._window, self._main):
            if key in area:
                self._drop(area, key)
        expires = self.clock() + (self.default_ttl_s if ttl_s is None else ttl_s)
        if self.policy == "lru":
            self._main[key] = (value, expires)
            self._bytes += size
            self._evict_main(0)
            return
        self._window[key] = (value, expires)
        self._window_bytes += size
        self._bytes += size
        while self._window_bytes > self._window_max and len(self._window) > 1:
            cand, (cv, ce) = self._window.popitem(last=False)
            csize = self._size(cand, cv)
            self._window_bytes -= csize
            self._bytes -= csize
            self._admit(cand, cv, ce, csize)
        self._evict_main(0)

    def _admit(self, key: str, value: bytes, expires: float, size: int) -> None:
        assert self._sketch is not None
        while self._bytes + size > self.max_bytes and self._main:
            victim = next(iter(self._main))
            if self._sketch.estimate(key) <= self._sketch.estimate(victim):
                return  # the window's leaver loses: not admitted
            self._drop(self._main, victim)
        self._main[key] = (value, expires)
        self._bytes += size

    def _evict_main(self, extra: int) -> None:
        while self._bytes + extra > self.max_bytes and self._main:
            self._drop(self._main, next(iter(self._main)))

    def _drop(self, area: OrderedDict[str, tuple[bytes, float]], key: str) -> None:
        value, _ = area.pop(key)
        size = self._size(key, value)
        self._bytes -= size
        if area is self._window:
            self._window_bytes -= size

    def delete(self, key: str) -> None:
        for area in (self._window, self._main):
            if key in area:
                self._drop(area, key)
