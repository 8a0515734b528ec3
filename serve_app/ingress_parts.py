"""An ingress replica's collaborators, built in one place from its configuration and the
handles Serve binds: the one pipeline and what it calls (solver and ETR handles with
failover, the ETR model in the ingress, the caches, the admission lanes), the request
contexts, the deployments' status, and both edges over them (the HTTP app, the gRPC
endpoints). The deployment (``serve_app.app``) receives them built and adds only what is its
process's own (CPU priority, the garbage collector, the listener)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import FastAPI
from ray.serve.handle import DeploymentHandle

from serve_app.cache_setup import build_cache
from serve_app.config import DispatchAppArgs
from serve_app.deployment_status import DeploymentStatus
from serve_app.failover import Failover
from serve_app.grpc_api.servicer import GrpcEndpoints
from serve_app.handles import EtrHandle, SolverHandle
from serve_app.hedging import HedgePolicy
from serve_app.http.app import build_http_app
from serve_app.http.endpoints import HttpEndpoints
from serve_app.ingress_metrics import stage_histogram
from serve_app.local_etr import LocalEtr
from serve_app.pipeline import Admission, Lane, Pipeline
from serve_app.pipeline.api_keys import ApiKeys
from serve_app.pipeline.ports import ReplicaCache
from serve_app.request_contexts import RequestContexts
from serve_app.schemas import RequestModels


@dataclass(frozen=True)
class IngressParts:
    """One replica's collaborators (``build_ingress_parts``)."""

    failover: Failover
    solver: SolverHandle
    etr_remote: EtrHandle
    etr: LocalEtr
    cache: ReplicaCache | None
    admission: Admission
    contexts: RequestContexts
    status: DeploymentStatus
    pipeline: Pipeline
    http_app: FastAPI
    grpc: GrpcEndpoints


def build_admission(args: DispatchAppArgs) -> Admission:
    a = args.admission
    return Admission(
        {
            name: Lane(name, lane.max_in_flight, lane.max_queued, a.offline_max_share)
            for name, lane in (("dispatch", a.dispatch), ("etr", a.etr), ("solve", a.solve))
        }
    )


def _observe_timings(timings: dict[str, float]) -> None:
    for stage, ms in timings.items():
        stage_histogram().observe(ms, tags={"stage": stage})


def build_ingress_parts(
    or_solver: DeploymentHandle,
    etr: DeploymentHandle,
    args: DispatchAppArgs,
    round_reader: Callable[[], str],
) -> IngressParts:
    """The collaborators of a replica configured by ``args``, calling the solver and ETR
    deployments through ``or_solver`` and ``etr``; ``round_reader`` gives the state of the
    replica's compiled gRPC reader (its readiness waits while it loads)."""
    res = args.resilience
    failover = Failover(
        res.call_timeout_s,
        res.retry_budget_s,
        res.max_replica_faults,
        hedge=HedgePolicy(res.hedge),
    )
    solver = SolverHandle(or_solver, failover, "OrSolver", res.replicas.watchdog_s)
    etr_remote = EtrHandle(etr, failover)
    etr_model = LocalEtr(
        etr_remote, args.etr_runtime, res.replicas.model_dump(), args.etr_placement
    )
    # The caches sit here, in front of the hops: a hit costs no call to a model.
    cache = build_cache(args.cache)
    admission = build_admission(args)
    auth = args.auth
    api_keys = ApiKeys.load(auth.protected, auth.tokens_env, auth.tokens_file)
    contexts = RequestContexts(api_keys, args.admission)
    status = DeploymentStatus(solver, etr_model, args.readiness_timeout_s, round_reader)
    pipeline = Pipeline(
        solver=solver,
        etr=etr_model,
        admission=admission,
        limits=args.limits,
        cache=cache,
        cache_answers=args.cache.responses,
        improve_routes=args.improve_routes,
        on_timings=_observe_timings,
    )
    faults = {"OrSolver": solver.handle, "Etr": etr_remote.handle}
    endpoints = HttpEndpoints(
        pipeline=pipeline,
        contexts=contexts,
        status=status,
        limits=args.limits,
        api_keys=api_keys,
        admission=admission,
        cache=cache,
        faults=faults if res.replicas.fault_injection else None,
    )
    models = RequestModels.for_limits(args.limits)
    return IngressParts(
        failover=failover,
        solver=solver,
        etr_remote=etr_remote,
        etr=etr_model,
        cache=cache,
        admission=admission,
        contexts=contexts,
        status=status,
        pipeline=pipeline,
        http_app=build_http_app(endpoints, args.limits, args.admission.default_timeout_s),
        grpc=GrpcEndpoints(pipeline, args.limits, models, contexts, status),
    )
