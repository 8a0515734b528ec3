"""Stopping work nobody waits for: a replica's call ends when its caller cancels it or its
deadline passes, at the computation's next checkpoint.

Serve cancels the replica's task when the ingress gives up on a call (the request's deadline
passed, or its client went away), but a computation in a worker thread cannot be cancelled
from outside: without this it runs to its end, holding the replica's CPU or device for an
answer nobody reads. The computation calls ``checkpoint`` between its steps (thread-safe);
from the moment the call is cancelled or past its deadline, the next one raises
``Abandoned``.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from actors.errors import Abandoned

T = TypeVar("T")


class Abandon:
    """timeout_s : seconds the caller waits, counted from now (None: no deadline)."""

    def __init__(self, timeout_s: float | None, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.deadline = math.inf if timeout_s is None else clock() + max(0.0, timeout_s)
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def remaining_s(self) -> float:
        return self.deadline - self.clock()

    def checkpoint(self) -> None:
        """Raise ``Abandoned`` once the call is cancelled or past its deadline."""
        if self._cancelled.is_set():
            raise Abandoned("its caller cancelled it")
        if self.clock() > self.deadline:
            raise Abandoned("its deadline passed")

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker thread; cancelling the awaiting task marks the call
        cancelled, so ``fn``'s next checkpoint ends it."""
        try:
            return await asyncio.to_thread(fn, *args)
        except asyncio.CancelledError:
            self.cancel()
            raise
