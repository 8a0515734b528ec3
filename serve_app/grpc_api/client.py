"""A typed gRPC client for the ``orml.v1.Orml`` service.

    from serve_app.grpc_api.client import OrmlGrpcClient
    with OrmlGrpcClient("127.0.0.1:9000") as client:
        plan = client.dispatch(round_)            # DispatchRound or DispatchRequest
        minutes = client.etr(orders).minutes

Requests and answers are the HTTP API's pydantic models (``serve_app.schemas``). Errors raise
``OrmlGrpcError`` with the status code, the message, the fields named (INVALID_ARGUMENT) and
the retry delay (RESOURCE_EXHAUSTED / UNAVAILABLE) read from the rich status trailer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

from domain import DispatchRound, Order
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api import orml_pb2_grpc
from serve_app.grpc_api.convert import message_to_dict
from serve_app.schemas import (
    DispatchRequest,
    DispatchResponse,
    EtrRequest,
    EtrResponse,
    OrderIn,
    SolveRequest,
    SolveResponse,
    round_fields,
)


class OrmlGrpcError(Exception):
    """code : grpc.StatusCode; fields : the invalid fields' paths; retry_after_s : None
    unless the server advised a retry."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        fields: list[str],
        retry_after_s: float | None,
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code, self.details = code, details
        self.fields, self.retry_after_s = fields, retry_after_s

    @classmethod
    def from_rpc(cls, err: grpc.RpcError) -> OrmlGrpcError:
        fields: list[str] = []
        retry: float | None = None
        for key, value in err.trailing_metadata() or ():
            if key != "grpc-status-details-bin":
                continue
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                    bad = error_details_pb2.BadRequest()
                    detail.Unpack(bad)
                    fields += [v.field for v in bad.field_violations]
                elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                    info = error_details_pb2.RetryInfo()
                    detail.Unpack(info)
                    retry = info.retry_delay.ToMilliseconds() / 1000.0
        return cls(err.code(), err.details() or "", fields, retry)


class OrmlGrpcClient:
    """address : host:port of Serve's gRPC ingress; timeout_s : each call's deadline (sent as
    gRPC's deadline and as ``x-timeout-ms``); application : the Serve app's name when several
    share the ingress; priority : "online" or "offline"."""

    def __init__(
        self,
        address: str,
        *,
        timeout_s: float = 30.0,
        application: str | None = None,
        priority: str = "online",
    ) -> None:
        self.timeout_s = timeout_s
        self._metadata = [("x-priority", priority), ("x-timeout-ms", str(int(timeout_s * 1000)))]
        if application:
            self._metadata.append(("application", application))
        # The answers of the largest rounds exceed gRPC's 4 MiB default.
        options = [("grpc.max_receive_message_length", 256 << 20)]
        self._channel = grpc.insecure_channel(address, options=options)
        self._stub = orml_pb2_grpc.OrmlStub(self._channel)

    def __enter__(self) -> OrmlGrpcClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _call(self, method: Any, request: Any) -> Any:
        try:
            return method(request, timeout=self.timeout_s, metadata=self._metadata)
        except grpc.RpcError as err:
            raise OrmlGrpcError.from_rpc(err) from None

    def dispatch(
        self, round_: DispatchRound | DispatchRequest, *, utc_offset_s: float = 0.0
    ) -> DispatchResponse:
        # A domain round goes as its fields, unvalidated here: the server validates it.
        fields = (
            round_.model_dump(exclude_none=True)
            if isinstance(round_, DispatchRequest)
            else round_fields(round_, utc_offset_s)
        )
        got = self._call(self._stub.Dispatch, pb.DispatchRequest(**fields))
        d = message_to_dict(got)
        d["routes"] = {rider: r["stops"] for rider, r in d["routes"].items()}
        d["model_version"] = d["model_version"] or None
        return DispatchResponse.model_validate(d)

    def etr(self, orders: Sequence[Order], *, utc_offset_s: float = 0.0) -> EtrResponse:
        req = EtrRequest(orders=[OrderIn.from_domain(o) for o in orders], utc_offset_s=utc_offset_s)
        got = self._call(self._stub.Etr, pb.EtrRequest(**req.model_dump(exclude_none=True)))
        return EtrResponse.model_validate(message_to_dict(got))

    def solve_routes(self, req: SolveRequest) -> SolveResponse:
        got = self._call(
            self._stub.SolveRoutes, pb.SolveRequest(**req.model_dump(exclude_none=True))
        )
        d = message_to_dict(got)
        d["routes"] = [r["tasks"] for r in d["routes"]]
        return SolveResponse.model_validate(d)
