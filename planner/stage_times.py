"""Wall-clock milliseconds per named stage of a computation, summed over the stage's entries
(a solve's passes), kept beside the algorithm instead of woven through it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StageTimes:
    """``with times("assign_ms"): ...`` adds the block's milliseconds to ``times.ms["assign_ms"]``
    (also when the block raises). Stages named at construction start at 0.0, in that order."""

    def __init__(self, *stages: str) -> None:
        self.ms: dict[str, float] = dict.fromkeys(stages, 0.0)

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.ms[stage] = self.ms.get(stage, 0.0) + (time.perf_counter() - start) * 1e3
