"""The HTTP routes' handlers (``serve_app.http.routes.ROUTES`` names each by its method here;
the router, ``serve_app.http.router``, calls each with the ``Request``): each builds its
request's context, hands the pipeline a decoder that parses the body only once the request is
admitted, and encodes the answer. Errors of every route come from one table
(``serve_app.error_answers``, through ``serve_app.http.app``).

(No ``from __future__ import annotations`` here: the OpenAPI document reads the handlers'
annotations as types.)
"""

from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, Response

from domain import TrafficClass
from etr import versions
from serve_app import codecs, kserve_v2
from serve_app.deployment_status import DeploymentStatus, EtrModelState
from serve_app.http import codec
from serve_app.http.answer_json import dispatch_answer_json
from serve_app.pipeline import (
    Admission,
    CallContext,
    EtrCall,
    Pipeline,
    RoundSource,
    SolveCall,
)
from serve_app.pipeline.api_keys import ApiKeys
from serve_app.pipeline.limits import Limits
from serve_app.request_contexts import RequestContexts
from serve_app.round_decoder import RoundDecoder
from serve_app.schemas import FaultRequest, RequestModels, plan_to_dict, prediction_to_dict


class HttpEndpoints:
    """pipeline : the one pipeline; contexts : a request's context from its headers; status :
    what the deployments say of themselves; limits : the configured limits (the request models
    and the round's decoder are built from them); api_keys : the keys of the operator routes;
    admission, cache : their counters for ``/admin/status`` (cache None: off); faults : the
    handles of the deployments a drill may poison (None: fault injection off)."""

    def __init__(
        self,
        *,
        pipeline: Pipeline,
        contexts: RequestContexts,
        status: DeploymentStatus,
        limits: Limits,
        api_keys: ApiKeys,
        admission: Admission,
        cache: Any = None,
        faults: dict[str, Any] | None = None,
    ) -> None:
        self.pipeline, self.contexts, self.status = pipeline, contexts, status
        self.limits, self.api_keys = limits, api_keys
        self.admission, self.cache, self.faults = admission, cache, faults
        self.models = RequestModels.for_limits(limits)
        self.round_decoder = RoundDecoder.for_limits(limits)

    def _context(self, request: Request, traffic_class: TrafficClass, endpoint: str) -> CallContext:
        return self.contexts(request.headers, traffic_class, endpoint)

    # ---- the API ------------------------------------------------------------------------------
    async def dispatch(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.ONLINE, "dispatch")

        async def decode() -> RoundSource:
            return self.round_decoder.read(*await codec.read_body(request))

        plan = await self.pipeline.dispatch(decode, ctx)
        if codecs.ready() and codec.answer_media_type(request) == codec.JSON:
            return Response(dispatch_answer_json(plan), media_type=codec.JSON)
        return codec.encode(request, plan_to_dict(plan))

    async def etr_minutes(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.ONLINE, "etr")

        async def decode() -> EtrCall:
            req = await codec.parse(request, self.models.etr)
            return EtrCall([o.to_domain() for o in req.orders], req.utc_offset_s)

        async def raw() -> bytes:
            # The same bytes of the same media type are the same request.
            media = codec.body_media_type(request)
            return media.encode() + b"\0" + await request.body()

        got = await self.pipeline.etr_minutes(decode, ctx, raw=raw)
        return codec.encode(request, prediction_to_dict(got))

    async def etr_bulk(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.OFFLINE, "etr_bulk")

        async def decode() -> EtrCall:
            req = await codec.parse(request, self.models.etr_bulk)
            return EtrCall([o.to_domain() for o in req.orders], req.utc_offset_s)

        got = await self.pipeline.etr_minutes(decode, ctx, self.limits.max_bulk_orders)
        return codec.encode(request, prediction_to_dict(got))

    async def routes_solve(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.OFFLINE, "solve")
        name = ""

        async def decode() -> SolveCall:
            nonlocal name
            req = await codec.parse(request, self.models.solve)
            name = req.name
            return req.to_call()

        result, cached = await self.pipeline.solve(decode, ctx)
        return codec.encode(request, {**result, "instance": name, "cached": cached})

    # ---- health -------------------------------------------------------------------------------
    async def healthz(self, request: Request) -> dict[str, str]:
        return {"status": "ok"}

    async def readyz(self, request: Request) -> JSONResponse:
        """Whether to send traffic here, and why not: each deployment's health, the solver's
        warm-up and the serving ETR versions; no configuration (that is /admin/status)."""
        ready, why = await self.status.readiness()
        return JSONResponse(status_code=200 if ready else 503, content=why)

    # ---- the Open Inference Protocol (KServe v2) for the ETR model ---------------------------
    # Errors raise as on every route; under /v2 they answer the protocol's way (app).
    async def v2_live(self, request: Request) -> dict[str, bool]:
        return {"live": True}

    async def v2_server_metadata(self, request: Request) -> dict[str, Any]:
        return kserve_v2.server_metadata(kserve_v2.HTTP_EXTENSIONS)

    async def v2_ready(self, request: Request) -> JSONResponse:
        ready = await self.status.ready()
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    async def _v2_model(self, request: Request) -> tuple[EtrModelState, str]:
        """The ETR model's state and the version the path names (the serving one where it
        names none), behind the etr endpoint's key; NotFound for another model or version."""
        self.api_keys.check("etr", request.headers.get("authorization"))
        state = await self.status.etr_model()
        model, version = request.path_params["model"], request.path_params.get("version", "")
        return state, kserve_v2.resolve_version(state, model, version)

    async def v2_model_ready(self, request: Request) -> JSONResponse:
        state, version = await self._v2_model(request)
        return JSONResponse(
            {"name": kserve_v2.MODEL, "version": version, "ready": state.ready},
            status_code=200 if state.ready else 503,
        )

    async def v2_model_metadata(self, request: Request) -> JSONResponse:
        state, _ = await self._v2_model(request)
        return JSONResponse(kserve_v2.model_metadata(state))

    async def v2_model_config(self, request: Request) -> JSONResponse:
        state, _ = await self._v2_model(request)
        return JSONResponse(kserve_v2.model_config(state, self.limits.max_orders))

    async def v2_statistics(self, request: Request) -> JSONResponse:
        self.api_keys.check("etr", request.headers.get("authorization"))
        state = await self.status.etr_model()
        params = request.path_params
        return JSONResponse(
            kserve_v2.model_statistics(state, params.get("model", ""), params.get("version", ""))
        )

    async def v2_repository_index(self, request: Request) -> JSONResponse:
        self.api_keys.check("etr", request.headers.get("authorization"))
        ready_only = kserve_v2.parse_index_request(await request.body())
        state = await self.status.etr_model()
        return JSONResponse(kserve_v2.repository_index(state, versions("etr"), ready_only))

    async def v2_infer(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.ONLINE, "etr")
        # No state asked for: a version not loaded is the model's NotFound.
        kserve_v2.check_model(request.path_params["model"])
        body = await request.body()
        call = kserve_v2.parse_infer(body, request.headers, self.limits.max_orders)
        version = request.path_params.get("version") or None
        got = await self.pipeline.etr_features(call.features, ctx, version)
        content, headers = kserve_v2.encode_infer(got.minutes, got.model_version, call)
        return Response(content, headers=headers)

    # ---- operators ----------------------------------------------------------------------------
    async def admin_status(self, request: Request) -> JSONResponse:
        """Operators: the deployments' full state (backends, runtimes, replicas, batching
        config), the admission lanes' and the cache's counters. An ``admin`` endpoint: behind
        a token wherever ``auth.protected`` names it (deploy/production.yaml does)."""
        self.api_keys.check("admin", request.headers.get("authorization"))
        return JSONResponse(
            {
                **await self.status.states(),
                "admission": self.admission.describe(),
                "cache": None if self.cache is None else self.cache.describe(),
            }
        )

    async def inject_fault(self, request: Request) -> dict[str, Any]:
        """Drills only: 404 unless deployed with ``resilience.replicas.fault_injection: true``. The
        token is checked before the body is read (nothing of the API is told to a caller
        without one)."""
        self.api_keys.check("admin", request.headers.get("authorization"))
        if self.faults is None:
            raise HTTPException(status_code=404, detail="Not Found")
        req = await codec.parse(request, FaultRequest)
        handle = self.faults[req.deployment]
        return {"deployment": req.deployment, "kind": req.kind} | (
            await handle.inject_fault.remote(req.kind)
        )
