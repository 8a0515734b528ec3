"""Per-model metrics of a model replica, exported through Ray's Prometheus endpoint (``ray_``
prefix); the ingress's own metrics are in ``serve_app.ingress_metrics``.

Queue time (request waiting for its batch) and compute time (the model call) are separate
histograms, as in Triton's per-model metrics; the batch-size histogram shows whether dynamic
batching is doing its job.
"""

from __future__ import annotations

from ray.serve import metrics

MS_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500]
_BATCH_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]


class ModelMetrics:
    """The histograms of one model; ``observe_*`` tag each value with the model's name."""

    def __init__(self, model: str) -> None:
        self.tags = {"model": model}
        self.queue_ms = metrics.Histogram(
            "orml_model_queue_ms",
            description="Time a request waited for its batch, ms.",
            boundaries=MS_BUCKETS,
            tag_keys=("model",),
        )
        self.compute_ms = metrics.Histogram(
            "orml_model_compute_ms",
            description="Time the model ran for one batch, ms.",
            boundaries=MS_BUCKETS,
            tag_keys=("model",),
        )
        self.batch_rows = metrics.Histogram(
            "orml_model_batch_rows",
            description="Rows per executed batch.",
            boundaries=_BATCH_BUCKETS,
            tag_keys=("model",),
        )

    def observe(self, queue_ms: float | None, compute_ms: float | None, rows: int | None) -> None:
        if queue_ms is not None:
            self.queue_ms.observe(queue_ms, tags=self.tags)
        if compute_ms is not None:
            self.compute_ms.observe(compute_ms, tags=self.tags)
        if rows is not None:
            self.batch_rows.observe(rows, tags=self.tags)
