"""Python heap growth of a live replica, on demand: where does a process's memory go?

RSS alone cannot tell a leak from a backlog or from the allocator keeping freed pages. A
``HeapProbe`` starts ``tracemalloc`` when first asked, keeps that moment's snapshot as the
baseline, and on every later call returns the allocation sites that grew most since then.
Tracing costs CPU (every allocation records ``frames`` stack frames), so it is off until a
diagnostic asks for it and ``stop`` turns it off again.
"""

from __future__ import annotations

import time
import tracemalloc
from dataclasses import dataclass
from typing import Any


@dataclass
class HeapProbe:
    frames: int = 1
    _baseline: tracemalloc.Snapshot | None = None
    _since: float | None = None

    def growth(self, limit: int = 20) -> dict[str, Any]:
        """Start tracing (first call) or report growth since it started.

        Returns {"tracing_since": s since epoch, "traced_mb": Python heap now, "peak_mb",
        "top": [{"where": "file:line", "grew_kb", "count_grew", "size_kb"}] (largest growth
        first; empty on the first call)}.
        """
        top: list[dict[str, Any]] = []
        if self._baseline is None or not tracemalloc.is_tracing():
            tracemalloc.start(self.frames)
            self._baseline, self._since = self._snapshot(), time.time()
            diffs = []
        else:
            diffs = self._snapshot().compare_to(self._baseline, "lineno")
            diffs.sort(key=lambda d: d.size_diff, reverse=True)
        for diff in diffs[: max(0, limit)]:
            frame = diff.traceback[0]
            top.append(
                {
                    "where": f"{frame.filename}:{frame.lineno}",
                    "grew_kb": round(diff.size_diff / 1024, 1),
                    "count_grew": diff.count_diff,
                    "size_kb": round(diff.size / 1024, 1),
                }
            )
        traced, peak = tracemalloc.get_traced_memory()
        return {
            "tracing_since": self._since,
            "traced_mb": round(traced / 2**20, 2),
            "peak_mb": round(peak / 2**20, 2),
            "top": top,
        }

    def stop(self) -> None:
        tracemalloc.stop()
        self._baseline = self._since = None

    @staticmethod
    def _snapshot() -> tracemalloc.Snapshot:
        # The probe's own bookkeeping would otherwise top the list.
        return tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
