"""The ingress deployment: the HTTP routes, the gRPC methods and the Python handle API, each a
thin adapter over one ``serve_app.pipeline.Pipeline``.

(No ``from __future__ import annotations`` here: FastAPI reads the endpoints' annotations as
types. The HTTP app itself, routes and middlewares, is built per replica by
``serve_app.http_app.build_http_app`` from the route table ``serve_app.http_routes.ROUTES``.)

Every protocol does the same three things: build the request's ``CallContext`` (deadline,
traffic class), hand the pipeline a decoder that parses the body only once the request is
admitted, and encode the answer. Errors of every protocol come from one table
(``serve_app.error_answers``).
"""

import asyncio
import gc
import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response
from ray import serve
from ray.serve.handle import DeploymentHandle

from actors.cpu_priority import raise_priority
from config import get_settings
from domain import DispatchPlan, DispatchRound, TrafficClass
from serve_app import http_edge, kserve_v2
from serve_app.cache_setup import build_cache
from serve_app.config import DispatchAppArgs, Limits
from serve_app.error_answers import (
    answer_for,
    retry_after_header,
    retry_after_s,
)
from serve_app.failover import Failover
from serve_app.grpc_api.servicer import GrpcIngress
from serve_app.grpc_cap import GRPC_CAP_ENV
from serve_app.handles import EtrHandle, SolverHandle
from serve_app.heap_probe import HeapProbe
from serve_app.hedging import HedgePolicy
from serve_app.http_app import build_http_app
from serve_app.http_routes import LANE_OF_PATH
from serve_app.ingress_metrics import CacheMetrics, stage_histogram
from serve_app.lean_listener import LeanListener
from serve_app.local_etr import LocalEtr
from serve_app.pipeline import (
    Admission,
    CallContext,
    DispatchCall,
    DispatchSource,
    EtrCall,
    Lane,
    Pipeline,
    SolveCall,
)
from serve_app.pipeline.api_keys import ApiKeys
from serve_app.pipeline.context import context_from_metadata
from serve_app.pipeline.errors import ServingError, Unavailable
from serve_app.round_decoder import RoundDecoder
from serve_app.schemas import (
    FaultRequest,
    RequestModels,
    plan_to_dict,
    prediction_to_dict,
)

log = logging.getLogger("orml.serve")


def build_admission(args: DispatchAppArgs) -> Admission:
    a = args.admission
    return Admission(
        {
            name: Lane(name, lane.max_in_flight, lane.max_queued, a.offline_max_share)
            for name, lane in (("dispatch", a.dispatch), ("etr", a.etr), ("solve", a.solve))
        }
    )


#: Allocations between two young-generation collections (CPython's default is 700).
GC_YOUNG_THRESHOLD = 10_000


def tune_gc() -> None:
    """The ingress builds tens of thousands of short-lived, acyclic objects per big request
    (request models, domain types), and Python's cyclic collector, at its default thresholds
    and with the hundreds of thousands of objects Ray, FastAPI and the schemas leave tracked,
    kept collecting them, which more than doubled a big round's decode. So: collect the young
    generation every
    ``GC_YOUNG_THRESHOLD`` allocations, and freeze what exists after start-up (modules,
    schemas, the app: never garbage) out of the collector's scans."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
    gc.collect()
    gc.freeze()


def _warn_if_grpc_uncapped(max_body_bytes: int) -> None:
    cap = get_settings().grpc_max_message_bytes
    if cap > max_body_bytes:
        log.warning(
            "gRPC messages up to %d bytes are buffered by the transport before the ingress "
            "refuses them (limits.max_body_bytes is %d): set %s=%d in this deployment's "
            "runtime_env (deploy.yaml does; `serve_app.builder.build_app` does)",
            cap,
            max_body_bytes,
            GRPC_CAP_ENV,
            max_body_bytes,
        )


def _observe_timings(timings: dict[str, float]) -> None:
    for stage, ms in timings.items():
        stage_histogram().observe(ms, tags={"stage": stage})


@serve.deployment(name="Ingress", ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=1024)
@serve.ingress()
class DispatchIngress(GrpcIngress):
    def __init__(
        self,
        or_solver: DeploymentHandle,
        etr: DeploymentHandle,
        args: dict[str, Any],
    ) -> None:
        self.args = DispatchAppArgs(**args)
        self.cpu_priority = raise_priority(self.args.ingress_priority_steps)
        log.info("Ingress CPU priority: %s", self.cpu_priority)
        self.models = RequestModels.for_limits(self.args.limits)
        self.round_decoder = RoundDecoder.for_limits(self.args.limits)
        _warn_if_grpc_uncapped(self.args.limits.max_body_bytes)
        res = self.args.resilience
        self.failover = Failover(
            res.call_timeout_s,
            res.retry_budget_s,
            res.max_replica_faults,
            hedge=HedgePolicy(res.hedge),
        )
        self.solver = SolverHandle(or_solver, self.failover, "OrSolver", res.replicas.watchdog_s)
        self.etr_remote = EtrHandle(etr, self.failover)
        self.etr = LocalEtr(
            self.etr_remote,
            self.args.etr_runtime,
            res.replicas.model_dump(),
            self.args.etr_placement,
        )
        # The caches sit here, in front of the hops: a hit costs no call to a model.
        self.cache = build_cache(self.args.cache)
        self._cache_metrics = CacheMetrics("etr")
        self.admission = build_admission(self.args)
        auth = self.args.auth
        self.api_keys = ApiKeys.load(auth.protected, auth.tokens_env, auth.tokens_file)
        self.pipeline = Pipeline(
            solver=self.solver,
            etr=self.etr,
            admission=self.admission,
            limits=self.args.limits,
            cache=self.cache,
            cache_answers=self.args.cache.responses,
            improve_routes=self.args.improve_routes,
            on_timings=_observe_timings,
        )
        self._heap = HeapProbe()
        tune_gc()
        self.http_app = build_http_app(self, self.args.limits)
        # Last: once registered, HAProxy may send the lanes' requests to it.
        self.lean = (
            LeanListener.start(
                self.http_app,
                serve.get_replica_context().replica_id.unique_id,
                LANE_OF_PATH,
                self.args.admission.default_timeout_s,
            )
            if self.args.lean_listener and LeanListener.wanted()
            else None
        )

    def __serve_build_asgi_app__(self) -> FastAPI:
        """The replica's HTTP app (Serve asks for it after ``__init__``)."""
        return self.http_app

    async def __del__(self) -> None:
        # Serve calls this once the replica has left HAProxy's config and drained its own.
        if self.lean is not None:
            await self.lean.stop()

    def _context(self, request: Request, traffic_class: TrafficClass, endpoint: str) -> CallContext:
        return self.call_context(request.headers, traffic_class, endpoint)

    def call_context(
        self, metadata: Mapping[str, str], traffic_class: TrafficClass, endpoint: str
    ) -> CallContext:
        """A request's context, built in this one place for HTTP (its headers) and gRPC (its
        metadata): the caller's key checked for ``endpoint`` (``Unauthenticated`` /
        ``Forbidden``), then its deadline, class and request id (``context_from_metadata``)."""
        self.api_keys.check(endpoint, metadata.get("authorization"))
        a = self.args.admission
        key = None if a.priority_key is None else a.priority_key.get_secret_value()
        return context_from_metadata(metadata, traffic_class, a.default_timeout_s, key)

    # ---- Python API -------------------------------------------------------------------------
    async def plan(
        self,
        round_: DispatchRound,
        utc_offset_s: float = 0.0,
        timeout_s: float | None = None,
        traffic_class: str = TrafficClass.ONLINE,
    ) -> DispatchPlan:
        """Plan a round through the pipeline; the handle API's entry point. Raises the errors
        of ``serve_app.pipeline.errors`` (``Overloaded`` when shed)."""
        timeout = self.args.admission.default_timeout_s if timeout_s is None else timeout_s
        ctx = CallContext.start(timeout, TrafficClass(traffic_class))

        async def decode() -> DispatchCall:
            return DispatchCall(round_, utc_offset_s)

        return await self.pipeline.dispatch(decode, ctx)

    # ---- HTTP -------------------------------------------------------------------------------
    async def dispatch(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.ONLINE, "dispatch")

        async def decode() -> DispatchSource:
            return self.round_decoder.read(*await http_edge.read_body(request))

        plan = await self.pipeline.dispatch(decode, ctx)
        return http_edge.encode(request, plan_to_dict(plan))

    async def etr_minutes(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.ONLINE, "etr")

        async def decode() -> EtrCall:
            req = await http_edge.parse(request, self.models.etr)
            return EtrCall([o.to_domain() for o in req.orders], req.utc_offset_s)

        async def raw() -> bytes:
            # The same bytes of the same media type are the same request.
            media = http_edge.body_media_type(request)
            return media.encode() + b"\0" + await request.body()

        got = await self.pipeline.etr_minutes(decode, ctx, raw=raw)
        return http_edge.encode(request, prediction_to_dict(got))

    async def etr_bulk(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.OFFLINE, "etr_bulk")

        async def decode() -> EtrCall:
            req = await http_edge.parse(request, self.models.etr_bulk)
            return EtrCall([o.to_domain() for o in req.orders], req.utc_offset_s)

        got = await self.pipeline.etr_minutes(decode, ctx, self.args.limits.max_bulk_orders)
        return http_edge.encode(request, prediction_to_dict(got))

    async def routes_solve(self, request: Request) -> Response:
        ctx = self._context(request, TrafficClass.OFFLINE, "solve")
        name = ""

        async def decode() -> SolveCall:
            nonlocal name
            req = await http_edge.parse(request, self.models.solve)
            name = req.name
            return req.to_call()

        result, cached = await self.pipeline.solve(decode, ctx)
        return http_edge.encode(request, {**result, "instance": name, "cached": cached})

    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    async def readyz(self) -> JSONResponse:
        """Whether to send traffic here, and why not: each deployment's health, the solver's
        warm-up and the serving ETR versions; no configuration (that is /admin/status)."""
        state = await self._deployment_states()
        if "reason" in state:
            return JSONResponse(status_code=503, content={"ready": False, **state})
        or_state, etr_state = state["or_solver"], state["etr"]
        ready = bool(
            or_state["healthy"] and not or_state["kernel_warming"] and etr_state["healthy"]
        )
        return JSONResponse(
            status_code=200 if ready else 503,
            content={
                "ready": ready,
                "or_solver": {k: or_state[k] for k in ("healthy", "kernel_warming")},
                "etr": {k: etr_state[k] for k in ("healthy", "model_version", "loaded_versions")},
            },
        )

    # ---- the Open Inference Protocol (KServe v2) for the ETR model ---------------------------
    async def server_ready(self) -> bool:
        """Whether ``/readyz`` says ready (the protocol's server readiness)."""
        return (await self.readyz()).status_code == 200

    async def etr_ready(self) -> bool:
        state = await self._deployment_states()
        return "reason" not in state and bool(state["etr"]["healthy"])

    async def etr_metadata(self) -> tuple[list[str], str]:
        """The ETR model's (versions, platform); Unavailable while the deployments' state
        cannot be read."""
        state = await self._deployment_states()
        if "reason" in state:
            raise Unavailable(state["reason"])
        etr = state["etr"]
        versions = [str(v) for v in etr.get("loaded_versions") or [etr["model_version"]]]
        return versions, str(etr.get("runtime", "onnx"))

    async def v2_live(self) -> dict[str, bool]:
        return {"live": True}

    async def v2_ready(self) -> JSONResponse:
        ready = await self.server_ready()
        return JSONResponse({"ready": ready}, status_code=200 if ready else 503)

    async def v2_model_ready(self) -> JSONResponse:
        ready = await self.etr_ready()
        return JSONResponse({"name": "etr", "ready": ready}, status_code=200 if ready else 503)

    async def v2_model_metadata(self, request: Request) -> JSONResponse:
        try:
            self.api_keys.check("etr", request.headers.get("authorization"))
            versions, platform = await self.etr_metadata()
        except ServingError as exc:
            return self._v2_error(exc)
        return JSONResponse(kserve_v2.model_metadata(versions, platform))

    async def v2_infer(self, request: Request) -> Response:
        try:
            ctx = self._context(request, TrafficClass.ONLINE, "etr")
            body = await request.body()
            call = kserve_v2.parse_infer(body, request.headers, self.args.limits.max_orders)
            got = await self.pipeline.etr_features(call.features, ctx)
        except ServingError as exc:
            return self._v2_error(exc)
        content, headers = kserve_v2.encode_infer(got.minutes, got.model_version, call)
        return Response(content, headers=headers)

    @staticmethod
    def _v2_error(exc: ServingError) -> JSONResponse:
        """The protocol's error body, ``{"error": ...}``, at the error table's status."""
        headers = {}
        after = retry_after_s(exc)
        if after is not None:
            headers["Retry-After"] = retry_after_header(after)
        return JSONResponse({"error": str(exc)}, answer_for(exc).http_status, headers)

    async def admin_status(self, request: Request) -> JSONResponse:
        """Operators: the deployments' full state (backends, runtimes, replicas, batching
        config), the admission lanes' and the cache's counters. An ``admin`` endpoint: behind
        a token wherever ``auth.protected`` names it (deploy/production.yaml does)."""
        self.api_keys.check("admin", request.headers.get("authorization"))
        return JSONResponse(
            {
                **await self._deployment_states(),
                "admission": self.admission.describe(),
                "cache": None if self.cache is None else self.cache.describe(),
            }
        )

    async def _deployment_states(self) -> dict[str, Any]:
        """Both deployments' ``ready()`` answers, or a short reason (details only logged)."""
        try:
            or_state, etr_state = await asyncio.wait_for(
                asyncio.gather(self.solver.ready(), self.etr.ready()),
                self.args.readiness_timeout_s,
            )
        except TimeoutError:
            return {"reason": f"a deployment did not answer in {self.args.readiness_timeout_s} s"}
        except Exception as exc:
            log.warning("readiness: a deployment could not answer", exc_info=exc)
            return {"reason": f"a deployment could not answer ({type(exc).__name__})"}
        return {"or_solver": or_state, "etr": etr_state}

    async def inject_fault(self, request: Request) -> dict[str, Any]:
        """Drills only: 404 unless deployed with ``resilience.replicas.fault_injection: true``. The
        token is checked before the body is read (nothing of the API is told to a caller
        without one)."""
        self.api_keys.check("admin", request.headers.get("authorization"))
        if not self.args.resilience.replicas.fault_injection:
            raise HTTPException(status_code=404, detail="Not Found")
        req = await http_edge.parse(request, FaultRequest)
        handle = self.solver.handle if req.deployment == "OrSolver" else self.etr_remote.handle
        return {"deployment": req.deployment, "kind": req.kind} | (
            await handle.inject_fault.remote(req.kind)
        )

    # ---- operations (handle only) -----------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Hops made per deployment, the admission lanes' counters and, where the ETR model
        runs in the ingress, its Busy by traffic class (tests, drills)."""
        if self.cache is not None:
            self._cache_metrics.export(self.cache.levels)
        return {
            "hops": {
                "OrSolver.solve_round": self.solver.calls,
                "Etr.predict": self.etr_remote.calls,
                "Etr in the ingress": self.etr.calls,
            },
            "admission": self.admission.describe(),
            "etr_in_the_ingress": self.etr.busy(),
        }

    def heap_growth(self, limit: int = 20) -> dict[str, Any]:
        """Handle only (no HTTP route): start tracing this process's Python heap, or report the
        allocation sites that grew most since; see ``serve_app.heap_probe``."""
        return self._heap.growth(limit)

    def heap_stop(self) -> None:
        self._heap.stop()

    def failover_events(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Retried attempts after ``since`` (s since epoch): drills read the timeline here."""
        return self.failover.recent(since)


def documentation_app() -> FastAPI:
    """The HTTP app exactly as a replica builds it, with no replica behind it (its endpoints
    are never called): for its OpenAPI document and tests of its shape."""
    unstarted = object.__new__(DispatchIngress.func_or_class)
    return build_http_app(unstarted, Limits())
