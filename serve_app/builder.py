"""``serve_app.builder:app_builder``: the application ``serve deploy`` and ``orml serve`` run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ray.serve import Application

from actors.etr_model import EtrDeployment
from actors.or_solver import OrSolverDeployment
from serve_app.app import DispatchIngress
from serve_app.config import DispatchAppArgs
from serve_app.grpc_api.cap import grpc_cap_options


def app_builder(args: DispatchAppArgs) -> Application:
    """Wire the graph: Ingress(OrSolver, Etr). Serve validates ``args``."""
    return build_app(args)


def build_app(
    args: DispatchAppArgs | dict[str, Any], options: Mapping[str, dict[str, Any]] | None = None
) -> Application:
    """The graph with per-deployment Serve options (by deployment name) applied on top.

    ``options`` does in Python what deploy.yaml's ``deployments:`` does for ``serve deploy``
    (replica counts, health-check periods, actor resources): tests and drills use it.
    """
    if isinstance(args, dict):
        args = DispatchAppArgs(**args)
    opts = dict(options or {})
    guard = args.resilience.replicas.model_dump()
    emulate = None if args.emulate_solver is None else args.emulate_solver.model_dump()
    or_solver = OrSolverDeployment.options(**opts.pop("OrSolver", {})).bind(
        args.backend, guard, emulate=emulate, offline=args.offline_solves.model_dump()
    )
    etr = EtrDeployment.options(**opts.pop("Etr", {})).bind(args.etr_runtime, guard)
    ingress_opts = dict(opts.pop("Ingress", {}))
    ingress_opts["ray_actor_options"] = grpc_cap_options(
        ingress_opts.get("ray_actor_options", DispatchIngress.ray_actor_options),
        args.limits.max_body_bytes,
    )
    ingress = DispatchIngress.options(**ingress_opts)
    if opts:
        raise ValueError(f"options for unknown deployments: {sorted(opts)}")
    return ingress.bind(or_solver, etr, args.model_dump())
