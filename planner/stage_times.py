"""Wall-clock milliseconds per named stage of a computation, summed over the stage's entries
(a solve's passes), kept beside the algorithm instead of woven through it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class StageTimes:
    """``with times("assign_ms"): ...`` adds the block's milliseconds to ``times.ms["assign_ms"]``
    (also when the block raises). Stages named at construction start at 0.0, in that order.

    wait : called at the end of each stage before the clock is read, e.g. a device stream's
    ``synchronize``: work a stage queued on a GPU is then counted in that stage, not in the
    first later one that waits for it (a few microseconds per stage)."""

    def __init__(self, *stages: str, wait: Callable[[], object] | None = None) -> None:
        self.ms: dict[str, float] = dict.fromkeys(stages, 0.0)
        self._wait = wait

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            if self._wait is not None:
                self._wait()
            self.ms[stage] = self.ms.get(stage, 0.0) + (time.perf_counter() - start) * 1e3
