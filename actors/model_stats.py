"""A model version's running totals, as Triton's statistics extension reports them.

The Prometheus histograms (``actors.model_metrics``) are sampled and exported through Ray's
metrics agent, seconds later and per node; these totals are exact and live in the process
that runs the model, so ``GET /v2/models/etr/stats`` (and gRPC ``ModelStatistics``) can answer
what a tool like ``perf_analyzer`` diffs before and after a run: requests answered and
failed, the time they queued and computed, and the model calls by batch size.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Duration:
    count: int = 0
    ns: int = 0

    def add(self, ns: int) -> None:
        self.count += 1
        self.ns += int(ns)

    def as_dict(self) -> dict[str, int]:
        return {"count": self.count, "ns": self.ns}


@dataclass
class ModelStats:
    """Totals since the version loaded in this process. Times are nanoseconds."""

    inference_count: int = 0  # rows computed (Triton counts a batch of k rows as k)
    execution_count: int = 0  # model calls
    last_inference_ms: int = 0  # wall-clock ms of the last answer, 0: none yet
    success: _Duration = field(default_factory=_Duration)  # a request: arrival to answer
    fail: _Duration = field(default_factory=_Duration)
    queue: _Duration = field(default_factory=_Duration)  # a request: arrival to its first call
    compute: _Duration = field(default_factory=_Duration)  # a request: its calls' time
    batches: dict[int, _Duration] = field(default_factory=dict)  # rows -> calls of that size

    def executed(self, rows: int, compute_ns: int) -> None:
        """One model call of ``rows`` rows that took ``compute_ns``."""
        self.execution_count += 1
        self.inference_count += rows
        self.batches.setdefault(rows, _Duration()).add(compute_ns)

    def answered(self, queue_ns: int, compute_ns: int, total_ns: int) -> None:
        """One request answered: it waited ``queue_ns`` for its first call, its calls took
        ``compute_ns`` (a batch's whole time for each request in it, as Triton counts), and
        ``total_ns`` from arrival to answer."""
        self.success.add(total_ns)
        self.queue.add(queue_ns)
        self.compute.add(compute_ns)
        self.last_inference_ms = int(time.time() * 1e3)

    def failed(self, total_ns: int) -> None:
        """One request that ended with an error after ``total_ns``."""
        self.fail.add(total_ns)

    def as_dict(self) -> dict[str, Any]:
        """Plain numbers (it crosses Ray's process boundary as JSON-able data):
        inference_count, execution_count, last_inference (ms), success, fail, queue,
        compute_infer ({count, ns} each) and batch_stats ([{batch_size, compute_infer}])."""
        return {
            "last_inference": self.last_inference_ms,
            "inference_count": self.inference_count,
            "execution_count": self.execution_count,
            "inference_stats": {
                "success": self.success.as_dict(),
                "fail": self.fail.as_dict(),
                "queue": self.queue.as_dict(),
                "compute_infer": self.compute.as_dict(),
            },
            "batch_stats": [
                {"batch_size": rows, "compute_infer": d.as_dict()}
                for rows, d in sorted(self.batches.items())
            ],
        }
