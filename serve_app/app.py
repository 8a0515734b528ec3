"""The ingress deployment: the wiring of one replica. It builds the one pipeline, the request
contexts, the deployments' status and the HTTP endpoints (``serve_app.http.endpoints``, bound
to the route table by ``serve_app.http.app.build_http_app``), serves that app through Serve and
its own listener, and carries what Serve must find on the deployment itself: the gRPC methods
(``serve_app.grpc_api.servicer``), the Python handle API (``plan``) and the operations calls.

Every protocol does the same three things: build the request's ``CallContext`` (deadline,
traffic class), hand the pipeline a decoder that parses the body only once the request is
admitted, and encode the answer. Errors of every protocol come from one table
(``serve_app.error_answers``).
"""

import gc
import logging
from typing import Any

from fastapi import FastAPI
from ray import serve
from ray.serve.handle import DeploymentHandle

from actors.cpu_priority import raise_priority
from config import get_settings
from domain import DispatchPlan, DispatchRound, TrafficClass
from serve_app.cache_setup import build_cache
from serve_app.config import DispatchAppArgs, Limits
from serve_app.deployment_status import DeploymentStatus
from serve_app.failover import Failover
from serve_app.grpc_api import round_message
from serve_app.grpc_api.cap import GRPC_CAP_ENV
from serve_app.grpc_api.servicer import GrpcIngress
from serve_app.handles import EtrHandle, SolverHandle
from serve_app.heap_probe import HeapProbe
from serve_app.hedging import HedgePolicy
from serve_app.http.app import build_http_app
from serve_app.http.endpoints import HttpEndpoints
from serve_app.http.lean_listener import LeanListener
from serve_app.http.routes import LANE_OF_PATH
from serve_app.ingress_metrics import CacheMetrics, stage_histogram
from serve_app.local_etr import LocalEtr
from serve_app.pipeline import (
    Admission,
    CallContext,
    DispatchCall,
    Lane,
    Pipeline,
)
from serve_app.pipeline.api_keys import ApiKeys
from serve_app.request_contexts import RequestContexts
from serve_app.schemas import (
    RequestModels,
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
        # First: the gRPC round reader loads (compiled in a child on a cold cache) while the
        # rest is built; the replica is ready once it is.
        round_message.load_in_background()
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
        api_keys = ApiKeys.load(auth.protected, auth.tokens_env, auth.tokens_file)
        self.contexts = RequestContexts(api_keys, self.args.admission)
        self.status = DeploymentStatus(
            self.solver, self.etr, self.args.readiness_timeout_s, round_message.ready
        )
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
        faults = {"OrSolver": self.solver.handle, "Etr": self.etr_remote.handle}
        endpoints = HttpEndpoints(
            pipeline=self.pipeline,
            contexts=self.contexts,
            status=self.status,
            limits=self.args.limits,
            api_keys=api_keys,
            admission=self.admission,
            cache=self.cache,
            faults=faults if res.replicas.fault_injection else None,
        )
        self.http_app = build_http_app(
            endpoints, self.args.limits, self.args.admission.default_timeout_s
        )
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
    return build_http_app(object.__new__(HttpEndpoints), Limits())
