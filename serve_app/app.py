"""The ingress: FastAPI routes over the OR solver and ETR deployments.

(No ``from __future__ import annotations`` here: FastAPI must see real types through
``serve.ingress``.)

The dispatch pipeline keeps arrays between deployments (no JSON inside the app):

    pack (here) -> OrSolver.candidates -> ETR cache (here) -> Etr.predict for the misses
                (batched across requests) -> OrSolver.assign -> plan (here)

``plan`` is also the Python handle API: ``serve.get_app_handle("orml").plan.remote(round_)``.
"""

import asyncio
import time
from dataclasses import replace
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from ray import serve
from ray.serve.handle import DeploymentHandle

from actors.cache_setup import build_cache
from actors.metrics import CacheMetrics, request_counter, stage_histogram
from cache.keys import cache_key
from domain import DispatchPlan, DispatchRound
from etr.features import N_FEATURES, features_from_orders
from etr.runtime import check_features
from planner.dispatch_round import build_plan, etr_floor_seconds, round_arrays
from planner.pdptw.instance import InstanceError, build_instance
from serve_app import errors
from serve_app.body_limit import BodyLimit
from serve_app.config import DispatchAppArgs, Limits
from serve_app.errors import LimitExceeded
from serve_app.failover import Failover
from serve_app.heap_probe import HeapProbe
from serve_app.schemas import (
    DispatchRequest,
    DispatchResponse,
    DomainError,
    EtrRequest,
    EtrResponse,
    FaultRequest,
    SolveRequest,
    SolveResponse,
)

api = FastAPI(
    title="orml-serve",
    version="0.1.0",
    description="Food-delivery dispatch rounds (OR route planning + ETR model) on Ray Serve.",
)
_limits = Limits()
api.add_middleware(BodyLimit, limit=lambda: _limits.max_body_bytes)
errors.install(api)


@api.middleware("http")
async def _count_requests(request: Request, call_next: Any) -> Any:
    response = await call_next(request)
    request_counter().inc(
        tags={
            "endpoint": request.url.path,
            "status": str(response.status_code),
            "priority": request.headers.get("x-priority", "online"),
        }
    )
    return response


def check_round_limits(req: DispatchRequest, limits: Limits) -> None:
    """Raise LimitExceeded (413) for a round over the configured sizes."""
    if len(req.riders) > limits.max_riders:
        raise LimitExceeded("riders", len(req.riders), limits.max_riders)
    if len(req.orders) > limits.max_orders:
        raise LimitExceeded("orders", len(req.orders), limits.max_orders)
    longest = max((len(r.route) for r in req.riders), default=0)
    if longest > limits.max_route_stops:
        raise LimitExceeded("route stops", longest, limits.max_route_stops)


@serve.deployment(name="Ingress", ray_actor_options={"num_cpus": 0.25}, max_ongoing_requests=256)
@serve.ingress(api)
class DispatchIngress:
    def __init__(
        self,
        or_solver: DeploymentHandle,
        etr: DeploymentHandle,
        args: dict[str, Any],
        offline_solver: DeploymentHandle | None = None,
    ) -> None:
        global _limits
        self.args = DispatchAppArgs(**args)
        _limits = self.args.limits
        self.or_solver = or_solver
        self.offline_solver = offline_solver or or_solver
        self.etr = etr
        res = self.args.resilience
        self.failover = Failover(res.call_timeout_s, res.retry_budget_s)
        self._model_version: str | None = None
        # The ETR cache sits here, in front of the hop: a hit costs no call to the model.
        self.cache = build_cache(self.args.cache.model_dump())
        self._cache_metrics = CacheMetrics("etr")
        self._heap = HeapProbe()

    async def etr_predict(self, features: np.ndarray) -> np.ndarray:
        """ETR minutes float32[k] for features float32[k, 39], through the result cache."""
        if self.cache is None or len(features) == 0:
            return await self._etr_call(features)
        version = await self.model_version()
        quant = self.cache.quant
        keys = [cache_key("etr", f"v{version}", row, quant) for row in features]

        async def compute_missing(idx: list[int]) -> list[float]:
            minutes = await self._etr_call(features[idx])
            return [float(m) for m in minutes]

        values = await self.cache.cache.get_many_or_compute(
            "etr", keys, compute_missing, self.cache.ttl_s
        )
        self._cache_metrics.export(self.cache.cache)
        return np.asarray(values, np.float32)

    async def _etr_call(self, features: np.ndarray) -> np.ndarray:
        return await self.failover.call("Etr.predict", lambda: self.etr.predict.remote(features))

    # ---- Python API -------------------------------------------------------------------------
    async def plan(self, round_: DispatchRound, utc_offset_s: float = 0.0) -> DispatchPlan:
        """Plan a round through the pipeline; the handle API's entry point."""
        t0 = time.perf_counter()
        packed, arrays = round_arrays(round_)
        t1 = time.perf_counter()
        candidates = await self.failover.call(
            "OrSolver.candidates", lambda: self.or_solver.candidates.remote(arrays, round_.weights)
        )
        t2 = time.perf_counter()
        floor = None
        if round_.orders:
            minutes = await self.etr_predict(
                features_from_orders(round_.orders, utc_offset_s=utc_offset_s)
            )
            floor = etr_floor_seconds(round_, minutes)
        t3 = time.perf_counter()
        assigned = await self.failover.call(
            "OrSolver.assign",
            lambda: self.or_solver.assign.remote(
                arrays, round_.weights, candidates, floor, self.args.improve_routes
            ),
        )
        t4 = time.perf_counter()
        plan = build_plan(round_, packed, assigned, floor)
        t5 = time.perf_counter()
        timings = {
            "pack_ms": (t1 - t0) * 1e3,
            "candidates_ms": (t2 - t1) * 1e3,
            "etr_ms": (t3 - t2) * 1e3,
            "assign_ms": (t4 - t3) * 1e3,
            "unpack_ms": (t5 - t4) * 1e3,
            "total_ms": (t5 - t0) * 1e3,
        }
        for stage, ms in timings.items():
            stage_histogram().observe(ms, tags={"stage": stage})
        return replace(plan, timings_ms=timings)

    async def predict_minutes(self, features: np.ndarray) -> np.ndarray:
        """ETR minutes for float32[k, 39] features (Python API); ValueError on bad rows."""
        features = check_features(np.asarray(features), N_FEATURES)
        return await self.etr_predict(features)

    # ---- HTTP -------------------------------------------------------------------------------
    @api.post("/v1/dispatch", response_model=DispatchResponse, summary="Plan a dispatch round")
    async def dispatch(self, req: DispatchRequest) -> DispatchResponse:
        check_round_limits(req, self.args.limits)
        plan = await self.plan(req.to_domain(), req.utc_offset_s)
        return DispatchResponse.from_plan(plan, await self.model_version())

    @api.post("/v1/etr", response_model=EtrResponse, summary="Predict delivery minutes")
    async def etr_minutes(self, req: EtrRequest) -> EtrResponse:
        if len(req.orders) > self.args.limits.max_orders:
            raise LimitExceeded("orders", len(req.orders), self.args.limits.max_orders)
        orders = [o.to_domain() for o in req.orders]
        minutes = await self.etr_predict(
            features_from_orders(orders, utc_offset_s=req.utc_offset_s)
        )
        return EtrResponse(
            minutes=[float(m) for m in minutes], model_version=await self.model_version()
        )

    @api.post(
        "/v1/routes/solve",
        response_model=SolveResponse,
        summary="Solve a static PDPTW instance (offline traffic; cached per instance)",
    )
    async def routes_solve(self, req: SolveRequest) -> SolveResponse:
        rows = [
            (
                t.id,
                t.x,
                t.y,
                t.demand,
                t.earliest,
                t.latest,
                t.service,
                t.pickup_index,
                t.delivery_index,
            )
            for t in req.tasks
        ]
        try:
            instance = build_instance(
                req.name, req.vehicles, req.capacity, rows, lambda k: f"tasks[{k}]"
            )
        except InstanceError as exc:
            loc, _, msg = str(exc).partition(": ")
            index = int(loc[len("tasks[") : -1]) if loc.startswith("tasks[") else 0
            raise DomainError(("body", "tasks", index), msg) from exc
        computed = False

        async def compute() -> dict[str, Any]:
            nonlocal computed
            computed = True
            return await self.failover.call(
                "OfflineSolver.solve_pdptw",
                lambda: self.offline_solver.solve_pdptw.remote(
                    instance, req.time_limit_s, req.seed
                ),
                timeout_s=req.time_limit_s + self.args.resilience.call_timeout_s,
            )

        if self.cache is None:
            result = await compute()
        else:
            payload = req.model_dump(exclude={"name"})
            key = cache_key("solve", "1", payload, self.cache.quant)
            result = await self.cache.cache.get_or_compute("solve", key, compute, 3600.0)
        return SolveResponse(**{**result, "instance": req.name}, cached=not computed)

    @api.get("/healthz", summary="The ingress process is alive")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/readyz", summary="Models loaded and warmed (503 until then)")
    async def readyz(self) -> JSONResponse:
        try:
            or_state, etr_state = await asyncio.wait_for(
                asyncio.gather(self.or_solver.ready.remote(), self.etr.ready.remote()),
                self.args.readiness_timeout_s,
            )
        except Exception as exc:
            return JSONResponse(status_code=503, content={"ready": False, "reason": repr(exc)})
        ready = bool(or_state["healthy"] and etr_state["healthy"])
        return JSONResponse(
            status_code=200 if ready else 503,
            content={
                "ready": ready,
                "or_solver": or_state,
                "etr": etr_state,
                "cache": None if self.cache is None else self.cache.describe(),
            },
        )

    @api.post("/admin/faults", include_in_schema=False)
    async def inject_fault(self, req: FaultRequest) -> dict[str, Any]:
        """Drills only: 404 unless deployed with ``resilience.fault_injection: true``."""
        if not self.args.resilience.fault_injection:
            raise HTTPException(status_code=404, detail="Not Found")
        handle = {"OrSolver": self.or_solver, "OfflineSolver": self.offline_solver}.get(
            req.deployment, self.etr
        )
        return {"deployment": req.deployment, "kind": req.kind} | (
            await handle.inject_fault.remote(req.kind)
        )

    def heap_growth(self, limit: int = 20) -> dict[str, Any]:
        """Handle only (no HTTP route): start tracing this process's Python heap, or report the
        allocation sites that grew most since; see ``serve_app.heap_probe``."""
        return self._heap.growth(limit)

    def heap_stop(self) -> None:
        self._heap.stop()

    def failover_events(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Retried attempts after ``since`` (s since epoch): drills read the timeline here."""
        return self.failover.recent(since)

    async def model_version(self) -> str:
        if self._model_version is None:
            state = await self.failover.call("Etr.ready", lambda: self.etr.ready.remote())
            self._model_version = state["model_version"]
        return self._model_version
