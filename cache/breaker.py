"""A circuit breaker for the Redis level: stop asking a failing Redis, probe, come back.

closed --(failure_threshold consecutive failures)--> open --(reset_after_s)--> half-open
half-open lets one probe through: success closes, failure opens again; a probe that ends
neither way (cancelled, or never sent) is ``release``d so the next call may probe.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class CircuitBreaker:
    def __init__(
        self,
        failure_threshold: int = 3,
        reset_after_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1 or reset_after_s <= 0:
            raise ValueError("failure_threshold must be >= 1 and reset_after_s > 0")
        self.failure_threshold, self.reset_after_s, self.clock = (
            failure_threshold,
            reset_after_s,
            clock,
        )
        self.state = BreakerState.CLOSED
        self.failures = 0
        self.opened_at = 0.0
        self._probing = False

    def allow(self) -> bool:
        """May a call go to Redis now?"""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.OPEN:
            if self.clock() - self.opened_at < self.reset_after_s:
                return False
            self.state = BreakerState.HALF_OPEN
            self._probing = False
        if self._probing:
            return False
        self._probing = True
        return True

    def success(self) -> None:
        self.state = BreakerState.CLOSED
        self.failures = 0
        self._probing = False

    def release(self) -> None:
        """A call ``allow`` let through ended without an answer from Redis either way."""
        self._probing = False

    def failure(self) -> None:
        self._probing = False
        if self.state is BreakerState.HALF_OPEN:
            self._open()
            return
        self.failures += 1
        if self.failures >= self.failure_threshold:
            self._open()

    def _open(self) -> None:
        self.state = BreakerState.OPEN
        self.opened_at = self.clock()
