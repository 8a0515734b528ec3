"""``serve_app.builder:app_builder``: the application ``serve deploy`` and ``orml serve`` run."""

from __future__ import annotations

from ray.serve import Application

from actors.etr_model import EtrDeployment
from actors.or_solver import OrSolverDeployment
from serve_app.app import DispatchIngress
from serve_app.config import DispatchAppArgs


def app_builder(args: DispatchAppArgs) -> Application:
    """Wire the graph: Ingress(OrSolver, Etr, OfflineSolver). Serve validates ``args``."""
    if isinstance(args, dict):
        args = DispatchAppArgs(**args)
    or_solver = OrSolverDeployment.bind(args.backend)
    # Offline static solves run on their own replicas so they never queue ahead of dispatch.
    offline = OrSolverDeployment.options(name="OfflineSolver", max_ongoing_requests=2).bind(
        args.backend
    )
    etr = EtrDeployment.bind(args.etr_model_version, args.etr_runtime)
    return DispatchIngress.bind(or_solver, etr, args.model_dump(), offline)
