"""What one request carries through the pipeline: its id, traffic class and deadline.

The deadline is fixed once, at the edge, from the caller's timeout (an ``x-timeout-ms`` header,
gRPC's own deadline, a handle argument) or the configured default. Below the edge nothing reads
a clock of its own: stages ask ``remaining_s()``, which reads the context's injected clock
(monotonic seconds; tests pass a fake).
"""

from __future__ import annotations

import hmac
import math
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from domain import TrafficClass
from serve_app.pipeline.errors import InvalidInput

Clock = Callable[[], float]
#: The most seconds a caller's x-timeout-ms may ask for (an hour).
MAX_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class CallContext:
    """request_id : for logs and the response; traffic_class : which queues it may jump;
    deadline : when the answer is due, seconds on ``clock`` (``inf``: none)."""

    request_id: str
    traffic_class: TrafficClass = TrafficClass.ONLINE
    deadline: float = math.inf
    clock: Clock = field(default=time.monotonic, repr=False, compare=False)

    @classmethod
    def start(
        cls,
        timeout_s: float | None,
        traffic_class: TrafficClass = TrafficClass.ONLINE,
        request_id: str | None = None,
        clock: Clock = time.monotonic,
    ) -> CallContext:
        """A context whose deadline is ``timeout_s`` from now (None: no deadline)."""
        deadline = math.inf if timeout_s is None else clock() + timeout_s
        return cls(request_id or uuid.uuid4().hex, TrafficClass(traffic_class), deadline, clock)

    def remaining_s(self) -> float:
        """Seconds left before the deadline (negative once passed; ``inf`` without one)."""
        return self.deadline - self.clock()

    def expired(self) -> bool:
        return self.remaining_s() <= 0


def context_from_metadata(
    metadata: Mapping[str, str],
    traffic_class: TrafficClass,
    default_timeout_s: float,
    priority_key: str | None = None,
) -> CallContext:
    """A request's context from its headers (HTTP) or metadata (gRPC), names lower-case:
    ``x-timeout-ms`` how long the caller waits (else ``default_timeout_s``; InvalidInput when
    not a number of ms in (0, 1 h]), ``x-priority: offline`` demotes the request from the
    endpoint's ``traffic_class`` and ``x-priority: online`` promotes it only with
    ``x-priority-key`` equal to ``priority_key`` (compared in constant time), ``x-request-id``
    names it (``safe_request_id``)."""
    timeout_s = default_timeout_s
    raw = metadata.get("x-timeout-ms")
    if raw is not None:
        try:
            timeout_s = float(raw) / 1000.0
        except ValueError:
            timeout_s = -1.0
        if not 0 < timeout_s <= MAX_TIMEOUT_S:
            raise InvalidInput.at(
                ("header", "x-timeout-ms"),
                f"must be a number of ms in (0, {MAX_TIMEOUT_S * 1000:.0f}]",
            )
    asked = str(metadata.get("x-priority", "")).lower()
    if asked == TrafficClass.OFFLINE:
        traffic_class = TrafficClass.OFFLINE
    elif asked == TrafficClass.ONLINE and priority_key:
        presented = str(metadata.get("x-priority-key", ""))
        if hmac.compare_digest(presented.encode(), priority_key.encode()):
            traffic_class = TrafficClass.ONLINE
    return CallContext.start(
        timeout_s, traffic_class, safe_request_id(metadata.get("x-request-id"))
    )


_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/+=-]{1,128}")


def safe_request_id(raw: str | None) -> str | None:
    """A caller's request id if it is 1-128 characters of ``[A-Za-z0-9._:/+=-]`` (it goes into
    logs and answers: no control characters, no unbounded length); else None (one is made)."""
    if raw is None or not _REQUEST_ID.fullmatch(raw):
        return None
    return raw
