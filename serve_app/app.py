"""The ingress deployment: one replica. It receives its collaborators built
(``serve_app.ingress_parts``: the one pipeline, the request contexts, the deployments' status,
the HTTP app and the gRPC endpoints), serves the HTTP app through Serve and its own listener,
and carries what Serve must find on the deployment itself: the gRPC methods (each handed to
``serve_app.grpc_api.servicer.GrpcEndpoints``), the Python handle API (``plan``) and the
operations calls.

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
from serve_app import codecs
from serve_app.config import DispatchAppArgs, Limits
from serve_app.grpc_api.cap import GRPC_CAP_ENV
from serve_app.grpc_api.servicer import serve_grpc_methods
from serve_app.heap_probe import HeapProbe
from serve_app.http.app import build_http_app
from serve_app.http.endpoints import HttpEndpoints
from serve_app.http.lean_listener import LeanListener
from serve_app.http.routes import LANE_OF_PATH
from serve_app.ingress_metrics import CacheMetrics
from serve_app.ingress_parts import build_ingress_parts
from serve_app.pipeline import (
    CallContext,
    RoundSource,
)

log = logging.getLogger("orml.serve")


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


@serve.deployment(name="Ingress", ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=1024)
@serve.ingress()
@serve_grpc_methods
class DispatchIngress:
    def __init__(
        self,
        or_solver: DeploymentHandle,
        etr: DeploymentHandle,
        args: dict[str, Any],
    ) -> None:
        self.args = DispatchAppArgs(**args)
        self.cpu_priority = raise_priority(self.args.ingress_priority_steps)
        log.info("Ingress CPU priority: %s", self.cpu_priority)
        # First: the round codecs load (compiled in a child on a cold cache) while the rest
        # is built; the replica is ready once they have loaded (or failed: rounds then take
        # the slower paths, see codecs.state).
        codecs.load_in_background()
        _warn_if_grpc_uncapped(self.args.limits.max_body_bytes)
        self.parts = build_ingress_parts(or_solver, etr, self.args, codecs.state)
        self.pipeline = self.parts.pipeline
        self.grpc = self.parts.grpc  # the gRPC methods' receiver (serve_grpc_methods)
        self._cache_metrics = CacheMetrics("etr")
        self._heap = HeapProbe()
        tune_gc()
        # Last: once registered, HAProxy may send the lanes' requests to it.
        self.lean = (
            LeanListener.start(
                self.parts.http_app,
                serve.get_replica_context().replica_id.unique_id,
                LANE_OF_PATH,
                self.args.admission.default_timeout_s,
            )
            if self.args.lean_listener and LeanListener.wanted()
            else None
        )

    def __serve_build_asgi_app__(self) -> FastAPI:
        """The replica's HTTP app (Serve asks for it after ``__init__``)."""
        return self.parts.http_app

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

        async def decode() -> RoundSource:
            return RoundSource.of_round(round_, utc_offset_s)

        return await self.pipeline.dispatch(decode, ctx)

    # ---- operations (handle only) -----------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Hops made per deployment, the admission lanes' counters and, where the ETR model
        runs in the ingress, its Busy by traffic class (tests, drills)."""
        parts = self.parts
        if parts.cache is not None:
            self._cache_metrics.export(parts.cache.levels)
        return {
            "hops": {
                "OrSolver.solve_round": parts.solver.calls,
                "Etr.predict": parts.etr_remote.calls,
                "Etr in the ingress": parts.etr.calls,
            },
            "admission": parts.admission.describe(),
            "etr_in_the_ingress": parts.etr.busy(),
        }

    def heap_growth(self, limit: int = 20) -> dict[str, Any]:
        """Handle only (no HTTP route): start tracing this process's Python heap, or report the
        allocation sites that grew most since; see ``serve_app.heap_probe``."""
        return self._heap.growth(limit)

    def heap_stop(self) -> None:
        self._heap.stop()

    def failover_events(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Retried attempts after ``since`` (s since epoch): drills read the timeline here."""
        return self.parts.failover.recent(since)


def documentation_app() -> FastAPI:
    """The HTTP app exactly as a replica builds it, with no replica behind it (its endpoints
    are never called): for its OpenAPI document and tests of its shape."""
    return build_http_app(object.__new__(HttpEndpoints), Limits())
