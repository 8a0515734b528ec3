"""The gRPC methods of the ingress (``orml.v1.Orml``, and the ETR model on the Open Inference
Protocol's ``inference.GRPCInferenceService``): the same pipeline as HTTP.

Serve's gRPC ingress calls the ingress deployment's method named after the RPC, with the
request message and Serve's ``grpc_context``; the deployment hands it to its
``GrpcEndpoints`` (``serve_grpc_methods``), an object as HTTP's endpoints are. Each method
builds the context from the call's metadata (``x-timeout-ms``, ``x-priority``,
``x-request-id``: gRPC's own deadline does not reach the replica, so the typed client sends it
as ``x-timeout-ms`` too), hands the pipeline a decoder, and answers. Errors follow
``serve_app.error_answers``'s table: the status code and message on the context, a
``google.rpc.Status`` (field violations, RetryInfo) in the ``grpc-status-details-bin`` trailer
and, for plain clients, ``retry-after`` (seconds).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from google.protobuf.message import DecodeError, Message
from pydantic import ValidationError

from domain import TrafficClass
from etr import versions
from serve_app import codecs, kserve_v2
from serve_app.deployment_status import DeploymentStatus, EtrModelState
from serve_app.error_answers import answer_for, detail_for, retry_after_header, retry_after_s
from serve_app.grpc_api import convert, inference, wire
from serve_app.grpc_api import kserve_v2_pb2 as v2
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api.answer_message import SerializedAnswer, dispatch_answer
from serve_app.grpc_api.registration import INFERENCE_METHODS, METHODS, RawRequest
from serve_app.http.codec import invalid_input
from serve_app.pipeline import (
    CallContext,
    EtrCall,
    InvalidInput,
    RoundSource,
    TooLarge,
)
from serve_app.pipeline.errors import NotFound, Unavailable
from serve_app.pipeline.limits import Limits
from serve_app.round_decoder import RoundDecoder
from serve_app.schemas import RequestModels, plan_to_dict

R = TypeVar("R", bound=Message)
T = TypeVar("T")
#: The gRPC method of each endpoint.
ENDPOINT_METHODS = {"dispatch": "Dispatch", "etr": "Etr", "solve": "SolveRoutes"}


class GrpcEndpoints:
    """The gRPC methods of both services, as HTTP's ``HttpEndpoints`` are its routes: the
    deployment hands each call here (``serve_grpc_methods``).

    pipeline : the one pipeline; limits : the request limits; models : the request models
    under them (``RequestModels``); contexts : a request's context from its metadata, built
    as for HTTP; status : what the deployments say of themselves, as the HTTP routes read it.
    """

    def __init__(
        self,
        pipeline: Any,
        limits: Limits,
        models: RequestModels,
        contexts: Callable[[Mapping[str, str], TrafficClass, str], CallContext],
        status: DeploymentStatus,
    ) -> None:
        self.pipeline, self.limits, self.models = pipeline, limits, models
        self.contexts, self.status = contexts, status

    async def Dispatch(  # noqa: N802
        self, request: RawRequest | pb.DispatchRequest, grpc_context: Any
    ) -> SerializedAnswer | pb.DispatchResponse:
        async def run(ctx: CallContext) -> SerializedAnswer | pb.DispatchResponse:
            async def decode() -> RoundSource:
                return self._dispatch_source(request)

            plan = await self.pipeline.dispatch(decode, ctx)
            if codecs.ready():
                return dispatch_answer(plan)
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

    # ---- the Open Inference Protocol (KServe v2) for the ETR model ---------------------------
    # Liveness and readiness answer without a key, as their HTTP routes do; metadata and
    # inference are the ``etr`` endpoint's (its key, its lane).
    async def ServerLive(self, request: Any, grpc_context: Any) -> v2.ServerLiveResponse:  # noqa: N802
        return v2.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, grpc_context: Any) -> v2.ServerReadyResponse:  # noqa: N802
        return v2.ServerReadyResponse(ready=await self.status.ready())

    async def ServerMetadata(  # noqa: N802
        self, request: Any, grpc_context: Any
    ) -> v2.ServerMetadataResponse:
        return v2.ServerMetadataResponse(**kserve_v2.server_metadata(kserve_v2.GRPC_EXTENSIONS))

    async def ModelReady(  # noqa: N802
        self, request: RawRequest | v2.ModelReadyRequest, grpc_context: Any
    ) -> v2.ModelReadyResponse:
        async def run(ctx: None) -> v2.ModelReadyResponse:
            msg = self._parse(request, v2.ModelReadyRequest)
            try:  # as Triton: a model or version not served is not ready, not an error
                state = await self.status.etr_model()
                kserve_v2.resolve_version(state, msg.name, msg.version)
            except (NotFound, Unavailable):
                return v2.ModelReadyResponse(ready=False)
            return v2.ModelReadyResponse(ready=state.ready)

        # No endpoint: no context (no key, no deadline), as the HTTP route.
        return await self._answer(
            grpc_context, None, TrafficClass.ONLINE, v2.ModelReadyResponse, run
        )

    async def ModelMetadata(  # noqa: N802
        self, request: RawRequest | v2.ModelMetadataRequest, grpc_context: Any
    ) -> v2.ModelMetadataResponse:
        def answer(msg: v2.ModelMetadataRequest, state: EtrModelState) -> Any:
            kserve_v2.resolve_version(state, msg.name, msg.version)
            return inference.metadata_response(state)

        return await self._about_the_model(request, grpc_context, "ModelMetadata", answer)

    async def ModelConfig(  # noqa: N802
        self, request: RawRequest | v2.ModelConfigRequest, grpc_context: Any
    ) -> v2.ModelConfigResponse:
        def answer(msg: v2.ModelConfigRequest, state: EtrModelState) -> Any:
            kserve_v2.resolve_version(state, msg.name, msg.version)
            config = kserve_v2.model_config(state, self.limits.max_orders)
            return inference.config_response(config)

        return await self._about_the_model(request, grpc_context, "ModelConfig", answer)

    async def ModelStatistics(  # noqa: N802
        self, request: RawRequest | v2.ModelStatisticsRequest, grpc_context: Any
    ) -> v2.ModelStatisticsResponse:
        def answer(msg: v2.ModelStatisticsRequest, state: EtrModelState) -> Any:
            stats = kserve_v2.model_statistics(state, msg.name, msg.version)
            return inference.statistics_response(stats)

        return await self._about_the_model(request, grpc_context, "ModelStatistics", answer)

    async def RepositoryIndex(  # noqa: N802
        self, request: RawRequest | v2.RepositoryIndexRequest, grpc_context: Any
    ) -> v2.RepositoryIndexResponse:
        def answer(msg: v2.RepositoryIndexRequest, state: EtrModelState) -> Any:
            index = kserve_v2.repository_index(state, versions("etr"), msg.ready)
            return inference.index_response(index)

        return await self._about_the_model(request, grpc_context, "RepositoryIndex", answer)

    async def _about_the_model(
        self, request: RawRequest | Message, grpc_context: Any, method: str, answer: Any
    ) -> Any:
        """An Open Inference Protocol call that reads the ETR model's state, as the ``etr``
        endpoint (its key, its deadline): ``answer(message, state)`` of ``method``'s request
        (``INFERENCE_METHODS``), or the error as the table says."""
        request_type, response_type = INFERENCE_METHODS[method]

        async def run(ctx: CallContext) -> Any:
            msg = self._parse(request, request_type)
            return answer(msg, await self.status.etr_model())

        return await self._answer(grpc_context, "etr", TrafficClass.ONLINE, response_type, run)

    async def ModelInfer(  # noqa: N802
        self, request: RawRequest | v2.ModelInferRequest, grpc_context: Any
    ) -> v2.ModelInferResponse:
        async def run(ctx: CallContext) -> v2.ModelInferResponse:
            msg = self._parse(request, v2.ModelInferRequest)
            call = inference.infer_request(msg, self.limits.max_orders)
            # No state asked for: a version not loaded is the model's NotFound.
            got = await self.pipeline.etr_features(call.features, ctx, msg.model_version or None)
            return inference.infer_response(got.minutes, got.model_version, call)

        return await self._answer(
            grpc_context, "etr", TrafficClass.ONLINE, v2.ModelInferResponse, run
        )

    # ---- shared -----------------------------------------------------------------------------
    def _parse(self, request: RawRequest | Message, message_type: type[R]) -> R:
        """An Open Inference Protocol request (``RawRequest``: parsed here) within the ETR
        endpoint's byte limit; TooLarge past it, InvalidInput when it is not the message."""
        limit = self.limits.body_bytes("etr")
        size = len(request.data) if isinstance(request, RawRequest) else request.ByteSize()
        if size > limit:
            raise TooLarge("message bytes", size, limit)
        if not isinstance(request, RawRequest):
            return request  # type: ignore[return-value]
        try:
            return message_type.FromString(request.data)
        except DecodeError as exc:
            raise InvalidInput.at(
                (), f"not a {message_type.DESCRIPTOR.full_name} message: {exc}"
            ) from None

    def _dispatch_source(self, request: RawRequest | Message) -> RoundSource:
        """A dispatch round as HTTP's fast path reads one (``RoundDecoder``: the request's
        rules over columns), from the message's bytes once its reader is loaded
        (``codecs.ready``); where it does not take the round whole, the model's
        reading, whose errors are the answer (as ``_validate``)."""
        model = self.models.dispatch

        def by_model() -> RoundSource:
            return self._validate(request, "dispatch", model).to_source()

        if not codecs.ready():
            return by_model()
        # The reader counts the lists itself (compiled): the bytes' limit is all to check here.
        data = self._sized(request, "dispatch")
        decoder = RoundDecoder.for_limits(self.limits)
        return decoder.from_message(data, by_model) or by_model()

    def _validate(self, request: RawRequest | Message, endpoint: str, model: Any) -> Any:
        """The request (``RawRequest``: parsed here, once admitted; a message: checked)
        validated as ``model``, the same schema as HTTP (``_message`` gives the checks before
        it)."""
        message = self._message(request, endpoint, model)
        try:
            return model.model_validate(convert.message_to_dict(message))
        except ValidationError as exc:
            raise invalid_input(exc, prefix=()) from None

    def _sized(self, request: RawRequest | Message, endpoint: str) -> bytes:
        """The request's bytes, within the endpoint's byte limit."""
        data = request.data if isinstance(request, RawRequest) else request.SerializeToString()
        limit = self.limits.body_bytes(endpoint)
        if len(data) > limit:
            raise TooLarge("message bytes", len(data), limit)
        return data

    def _bytes(self, request: RawRequest | Message, endpoint: str) -> bytes:
        """The request's bytes within the endpoint's byte limit and its lists within theirs
        (counted on the wire before anything is parsed, ``wire.check_counts``)."""
        data = self._sized(request, endpoint)
        wire.check_counts(data, endpoint, self.limits)
        return data

    def _message(self, request: RawRequest | Message, endpoint: str, model: Any) -> Message:
        """The request's message: bytes and lists within their limits (``_bytes``), parsed
        once admitted, its lists counted again as the model bounds them."""
        if isinstance(request, RawRequest):
            data = self._bytes(request, endpoint)
            message_type = METHODS[ENDPOINT_METHODS[endpoint]][0]
            try:
                request = message_type.FromString(data)
            except DecodeError as exc:
                raise InvalidInput.at(
                    (), f"not a {message_type.DESCRIPTOR.full_name} message: {exc}"
                ) from None
        else:
            self._bytes(request, endpoint)
        RequestModels.check_lengths(request, model)
        return request

    async def _answer(
        self,
        grpc_context: Any,
        endpoint: str | None,
        traffic_class: TrafficClass,
        empty: type[R],
        run: Callable[[Any], Awaitable[R]],
    ) -> R:
        """``run(ctx)`` answered: its message, or its error as the table says. ctx : the
        call's context for ``endpoint`` (None: none is built)."""
        try:
            if endpoint is None:
                return await run(None)
            metadata = dict(grpc_context.invocation_metadata())
            return await run(self.contexts(metadata, traffic_class, endpoint))
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


def serve_grpc_methods(cls: type[T]) -> type[T]:
    """Give the deployment class ``cls`` a method per RPC of both services: Serve's gRPC
    ingress calls the deployment's own method named after the RPC, and each hands the call to
    the replica's ``self.grpc`` (a ``GrpcEndpoints``)."""

    def delegate(name: str) -> Callable[..., Awaitable[Message]]:
        async def method(self: Any, request: Any, grpc_context: Any) -> Message:
            return await getattr(self.grpc, name)(request, grpc_context)

        method.__name__ = method.__qualname__ = name
        return method

    for name in (*METHODS, *INFERENCE_METHODS):
        setattr(cls, name, delegate(name))
    return cls
