"""A small typed HTTP client for services in other processes (its gRPC twin:
``serve_app.grpc_api.client``).

    from serve_app.http.client import OrmlClient
    with OrmlClient("http://127.0.0.1:8000") as c:
        plan = c.dispatch(round_)          # a domain DispatchRound, or a DispatchRequest
        minutes = c.etr(orders)

Errors: ``httpx.HTTPStatusError`` for 4xx/5xx, with the server's JSON detail in the message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import orjson

from domain import DispatchRound, Order
from serve_app.schemas import (
    DispatchRequest,
    DispatchResponse,
    EtrRequest,
    EtrResponse,
    OrderIn,
    round_fields,
)


class OrmlClient:
    """Synchronous client; ``timeout_s`` per request."""

    def __init__(self, base_url: str, *, timeout_s: float = 30.0, priority: str = "online"):
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout_s, headers={"x-priority": priority}
        )

    def __enter__(self) -> OrmlClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: str | bytes) -> dict[str, Any]:
        r = self._http.post(path, content=body, headers={"content-type": "application/json"})
        if r.status_code >= 400:
            raise httpx.HTTPStatusError(
                f"{path} answered {r.status_code}: {r.text[:2000]}", request=r.request, response=r
            )
        return r.json()

    def dispatch(
        self, round_: DispatchRound | DispatchRequest, *, utc_offset_s: float = 0.0
    ) -> DispatchResponse:
        # A domain round goes as its fields, unvalidated here: the server validates it.
        body = (
            round_.model_dump_json()
            if isinstance(round_, DispatchRequest)
            else orjson.dumps(round_fields(round_, utc_offset_s))
        )
        return DispatchResponse.model_validate(self._post("/v1/dispatch", body))

    def etr(self, orders: Sequence[Order], *, utc_offset_s: float = 0.0) -> EtrResponse:
        req = EtrRequest(orders=[OrderIn.from_domain(o) for o in orders], utc_offset_s=utc_offset_s)
        return EtrResponse.model_validate(self._post("/v1/etr", req.model_dump_json()))

    def ready(self) -> bool:
        return self._http.get("/readyz").status_code == 200
