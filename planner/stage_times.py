"""Milliseconds per named stage of a computation, summed over the stage's entries (a solve's
passes), kept beside the algorithm instead of woven through it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: What times a stage on a device: a new event (``record()``, ``synchronize()``), and the
#: milliseconds between two recorded events (CuPy: ``cuda.Event``, ``cuda.get_elapsed_time``).
DeviceClock = tuple[Callable[[], Any], Callable[[Any, Any], float]]


class StageTimes:
    """``with times("assign_ms"): ...`` adds the block's milliseconds to ``times.ms["assign_ms"]``
    (also when the block raises). Stages named at construction start at 0.0, in that order.

    device : where the stages queue work on a GPU, its clock (``DeviceClock``): each stage is
    then timed between two events recorded on the device's stream, so the work a stage queued
    is counted in it and not in the first later stage that waits for it, and nothing waits for
    the device while the stages run: the events are read once, when ``ms`` is (after the
    computation's answer has come back, they are done). Without it, the wall clock."""

    def __init__(self, *stages: str, device: DeviceClock | None = None) -> None:
        self._ms: dict[str, float] = dict.fromkeys(stages, 0.0)
        self._device = device
        self._pending: list[tuple[str, Any, Any]] = []

    @property
    def ms(self) -> dict[str, float]:
        """Milliseconds per stage (reading the device's events waits for the last one)."""
        if self._pending and self._device is not None:
            _, elapsed = self._device
            self._pending[-1][2].synchronize()  # the stream's order: the others are done too
            for stage, start, end in self._pending:
                self._ms[stage] = self._ms.get(stage, 0.0) + elapsed(start, end)
            self._pending.clear()
        return self._ms

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        if self._device is not None:
            event, _ = self._device
            start = event()
            start.record()
            self._ms.setdefault(stage, 0.0)
            try:
                yield
            finally:
                end = event()
                end.record()
                self._pending.append((stage, start, end))
            return
        began = time.perf_counter()
        try:
            yield
        finally:
            self._ms[stage] = self._ms.get(stage, 0.0) + (time.perf_counter() - began) * 1e3
