"""The request size limits every protocol holds a request to (``args.limits``).

Part of the pipeline's own vocabulary: the pipeline checks a round against them, the schemas
bound their lists with them, the gRPC wire counter and the body-size middleware read them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Request size limits; a request over any of them is answered 413 naming the limit.

    Every list of a request is validated against these while it is read (validation stops at
    the first element past a limit), so a request's parsing work is bounded by them, not by
    its body."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    max_body_bytes: int = Field(16 << 20, ge=1024, description="Request body size, bytes.")
    max_riders: int = Field(5000, ge=1, description="Riders per dispatch round.")
    max_orders: int = Field(2000, ge=1, description="New orders per dispatch round or ETR call.")
    max_route_stops: int = Field(32, ge=1, description="Stops on one rider's committed route.")
    max_bulk_orders: int = Field(
        20_000, ge=1, description="Orders per POST /v1/etr/bulk (offline re-scoring)."
    )
    max_tasks: int = Field(
        1001,
        ge=3,
        le=10_001,
        description="Tasks of a static solve (POST /v1/routes/solve), the depot included: Li & "
        "Lim's largest instances have 1000 tasks. Its memory grows with the square of it.",
    )

    def body_bytes(self, endpoint: str) -> int:
        """The body limit of one endpoint: ``max_body_bytes`` for a dispatch round; for the
        others what their list limits can fill, generously (``BYTES_PER_ORDER``,
        ``BYTES_PER_TASK``), within it; ``SMALL_BODY_BYTES`` for any other path. Parsing a
        body costs a multiple of its bytes (``bench/hostile.py``), so an ETR call's orders do
        not get a dispatch round's body limit."""
        if endpoint == "dispatch":
            return self.max_body_bytes
        need = {
            "etr": self.max_orders * BYTES_PER_ORDER,
            "etr_bulk": self.max_bulk_orders * BYTES_PER_ORDER,
            "solve": self.max_tasks * BYTES_PER_TASK,
        }.get(endpoint, SMALL_BODY_BYTES)
        return min(self.max_body_bytes, need + 4096)


#: Body bytes one order may take, pretty-printed with a 128-character id and 27 item counts
#: (~1 KiB), twice over; one static-solve task, likewise.
BYTES_PER_ORDER = 2048
BYTES_PER_TASK = 512
#: Any other path (the drills' /admin/faults takes a few bytes).
SMALL_BODY_BYTES = 60 * 1024
