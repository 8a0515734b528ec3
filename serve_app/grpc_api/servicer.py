"""The gRPC methods of the ingress (``orml.v1.Orml``): the same pipeline as HTTP.

Serve's gRPC ingress calls the ingress deployment's method named after the RPC, with the
request message and Serve's ``grpc_context``. Each method builds the context from the call's
metadata (``x-timeout-ms``, ``x-priority``, ``x-request-id``: gRPC's own deadline does not
reach the replica, so the typed client sends it as ``x-timeout-ms`` too), hands the pipeline
a decoder, and answers. Errors follow ``serve_app.error_answers``'s table: the status code
and message on the context, a ``google.rpc.Status`` (field violations, RetryInfo) in the
``grpc-status-details-bin`` trailer and, for plain clients, ``retry-after`` (seconds).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from google.protobuf.message import DecodeError, Message
from pydantic import ValidationError

from domain import TrafficClass
from serve_app.error_answers import answer_for, detail_for, retry_after_header, retry_after_s
from serve_app.grpc_api import convert, wire
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api.registration import METHODS, RawRequest
from serve_app.http_edge import invalid_input
from serve_app.pipeline import (
    CallContext,
    EtrCall,
    InvalidInput,
    TooLarge,
)
from serve_app.schemas import DispatchRequest, RequestModels, plan_to_dict

R = TypeVar("R", bound=Message)
#: The gRPC method of each endpoint.
ENDPOINT_METHODS = {"dispatch": "Dispatch", "etr": "Etr", "solve": "SolveRoutes"}


class GrpcIngress:
    """Mixed into the ingress deployment, which provides ``pipeline``, ``args``, ``models``
    and ``call_context`` (the request context, built as for HTTP)."""

    pipeline: Any
    args: Any
    models: Any  # serve_app.schemas.RequestModels
    call_context: Callable[[Mapping[str, str], TrafficClass, str], CallContext]

    async def Dispatch(  # noqa: N802
        self, request: RawRequest | pb.DispatchRequest, grpc_context: Any
    ) -> pb.DispatchResponse:
        async def run(ctx: CallContext) -> pb.DispatchResponse:
            async def decode() -> DispatchRequest:
                return self._validate(request, "dispatch", self.models.dispatch)

            plan = await self.pipeline.dispatch(decode, ctx)
            return convert.dispatch_response(plan_to_dict(plan))

        return await self._answer(
            grpc_context, "dispatch", TrafficClass.ONLINE, pb.DispatchResponse, run
        )

    async def Etr(  # noqa: N802
        self, request: RawRequest | pb.EtrRequest, grpc_context: Any
    ) -> pb.EtrResponse:
        async def run(ctx: CallContext) -> pb.EtrResponse:
            async def decode() -> EtrCall:
                req = self._validate(request, "etr", self.models.etr)
                return EtrCall([o.to_domain() for o in req.orders], req.utc_offset_s)

            async def raw() -> bytes:
                data = request.data if isinstance(request, RawRequest) else b""
                return b"application/x-protobuf\0" + data

            got = await self.pipeline.etr_minutes(
                decode, ctx, raw=raw if isinstance(request, RawRequest) else None
            )
            return pb.EtrResponse(minutes=got.minutes.tolist(), model_version=got.model_version)

        return await self._answer(grpc_context, "etr", TrafficClass.ONLINE, pb.EtrResponse, run)

    async def SolveRoutes(  # noqa: N802
        self, request: RawRequest | pb.SolveRequest, grpc_context: Any
    ) -> pb.SolveResponse:
        name = ""

        async def run(ctx: CallContext) -> pb.SolveResponse:
            async def decode():
                nonlocal name
                req = self._validate(request, "solve", self.models.solve)
                name = req.name
                return req.to_call()

            result, cached = await self.pipeline.solve(decode, ctx)
            return convert.solve_response({**result, "instance": name, "cached": cached})

        return await self._answer(
            grpc_context, "solve", TrafficClass.OFFLINE, pb.SolveResponse, run
        )

    # ---- shared -----------------------------------------------------------------------------
    def _validate(self, request: RawRequest | Message, endpoint: str, model: Any) -> Any:
        """The request (``RawRequest``: parsed here, once admitted; a message: checked)
        validated as ``model``: bytes within the endpoint's limit, lists within theirs
        (counted on the wire before it is parsed, ``wire.check_counts``, and again before it
        is converted), then the same schema as HTTP."""
        limit = self.args.limits.body_bytes(endpoint)
        size = len(request.data) if isinstance(request, RawRequest) else request.ByteSize()
        if size > limit:
            raise TooLarge("message bytes", size, limit)
        if isinstance(request, RawRequest):
            wire.check_counts(request.data, endpoint, self.args.limits)
            message_type = METHODS[ENDPOINT_METHODS[endpoint]][0]
            try:
                request = message_type.FromString(request.data)
            except DecodeError as exc:
                raise InvalidInput.at(
                    (), f"not a {message_type.DESCRIPTOR.full_name} message: {exc}"
                ) from None
        RequestModels.check_lengths(request, model)
        try:
            return model.model_validate(convert.message_to_dict(request))
        except ValidationError as exc:
            raise invalid_input(exc, prefix=()) from None

    async def _answer(
        self,
        grpc_context: Any,
        endpoint: str,
        traffic_class: TrafficClass,
        empty: type[R],
        run: Callable[[CallContext], Awaitable[R]],
    ) -> R:
        try:
            metadata = dict(grpc_context.invocation_metadata())
            return await run(self.call_context(metadata, traffic_class, endpoint))
        except Exception as exc:
            answer = answer_for(exc)
            detail = detail_for(exc, grpc_context.request_id() or "")
            if isinstance(exc, InvalidInput):
                detail = str(exc)
            after = retry_after_s(exc)
            code = answer.grpc_code
            grpc_context.set_code(code)
            grpc_context.set_details(str(detail))
            trailers: list[tuple[str, Any]] = [
                (
                    "grpc-status-details-bin",
                    convert.rich_status(code.value[0], str(detail), exc, after),
                )
            ]
            if after is not None:
                trailers.append(("retry-after", retry_after_header(after)))
            grpc_context.set_trailing_metadata(trailers)
            return empty()
