"""The OR solver deployment: prices candidates and assigns orders, on its own device.

Stateless: every call brings the round's arrays, so any replica can serve any stage and a
replica that dies loses nothing but the call in flight (which the caller may retry: the same
arrays give the same answer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray import serve

from actors.device import replica_guard
from actors.faults import replica_id
from domain import DispatchWeights
from kernels import compiled
from kernels.backend import module_for, resolve_backend, to_numpy
from kernels.insertion_costs import Insertions
from planner import generate_round
from planner.dispatch_round import Assigned, RoundArrays, assign_and_insert, price_candidates
from planner.dispatch_round import round_arrays as pack_arrays


def _to_host(ins: Insertions) -> Insertions:
    return Insertions(**{k: to_numpy(v) for k, v in ins.__dict__.items()})


@serve.deployment(name="OrSolver", ray_actor_options={"num_cpus": 0.5})
class OrSolverDeployment:
    """backend : "auto" | "numpy" | "cupy" (see ``kernels.backend``).

    watchdog_s : a dispatch stage still running after this long marks the replica unhealthy
    (an offline solve gets its time limit on top); exit_on_device_fault : end the process once
    the device failed (see ``actors.device.exit_soon``); health_hold_s : a health check
    waits this long unless the device fails meanwhile (``DeviceGuard.check_and_hold``);
    fault_injection : accept ``inject_fault``.
    """

    def __init__(
        self,
        backend: str = "auto",
        watchdog_s: float = 10.0,
        probe_timeout_s: float = 1.0,
        exit_on_device_fault: bool = True,
        health_hold_s: float = 0.0,
        fault_injection: bool = False,
    ) -> None:
        self.backend = resolve_backend(backend)
        self.xp = module_for(self.backend)
        self.watchdog_s = watchdog_s
        _, probe = pack_arrays(generate_round(8, 4, seed=123))
        self._probe = probe.to(self.xp)
        self._weights = DispatchWeights()
        self.health_hold_s = health_hold_s
        self._jit_pending = self.backend == "numpy"  # the compiled CPU builds, see check_health
        if self._jit_pending:
            compiled.defer()
        # Arming runs the probe: it also warms the kernels (and compiles the CUDA module).
        self.guard = replica_guard(
            "cuda:0" if self.backend == "cupy" else "cpu",
            lambda: price_candidates(self._probe, self._weights).cost,
            probe_timeout_s=probe_timeout_s,
            exit_on_device_fault=exit_on_device_fault,
            fault_injection=fault_injection,
        )
        assign_and_insert(self._probe, self._weights)  # and the assignment and insertion path

    def ready(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "replica": replica_id(),
            "healthy": self.guard.healthy,
            "reason": self.guard.reason,
            # Answers are the same either way; a warming replica is only slower.
            "kernel_warming": compiled.warming(),
        }

    def inject_fault(self, kind: str) -> dict[str, Any]:
        """Drills only (see ``actors.faults``); FaultInjectionDisabled unless deployed with it."""
        return {"replica": replica_id(), "at": self.guard.faults.inject(kind)}

    def candidates(self, arrays: RoundArrays, weights: DispatchWeights) -> Insertions:
        """Stage 1: insertion costs of every new order into every route (host arrays out)."""
        with self.guard.watch(self.watchdog_s):
            return _to_host(price_candidates(arrays.to(self.xp), weights))

    def assign(
        self,
        arrays: RoundArrays,
        weights: DispatchWeights,
        first: Insertions | None,
        etr_floor: np.ndarray | None,
        improve_routes: bool = True,
    ) -> Assigned:
        """Stage 3: assignment, insertion, re-pricing passes and improvement."""
        with self.guard.watch(self.watchdog_s):
            first_dev = None
            if first is not None:
                first_dev = Insertions(**{k: self.xp.asarray(v) for k, v in first.__dict__.items()})
            return assign_and_insert(
                arrays.to(self.xp),
                weights,
                first=first_dev,
                etr_floor=etr_floor,
                improve_routes=improve_routes,
            )

    def solve_pdptw(self, instance: Any, time_limit_s: float, seed: int) -> dict[str, Any]:
        """Offline: solve a static PDPTW instance (``planner.pdptw``); a summary with routes."""
        from planner.pdptw.evaluate import evaluate
        from planner.pdptw.solve import solve

        with self.guard.watch(time_limit_s + self.watchdog_s):
            sol = solve(instance, time_limit_s=time_limit_s, seed=seed)
        ev = evaluate(instance, sol.routes)
        return {
            "instance": instance.name,
            "vehicles": ev.vehicles,
            "distance": ev.distance,
            "feasible": ev.feasible and not sol.unassigned,
            "seconds": sol.seconds,
            "routes": sol.routes,
        }

    async def check_health(self) -> None:
        await self.guard.check_and_hold(self.health_hold_s)
        if self._jit_pending:
            # Loaded once the replica is up, not in __init__: the loader's child process would
            # compete for the CPU with the start of a replacement replica and delay the moment
            # Serve counts it RUNNING. The array loops answer (bit-identically) until then.
            self._jit_pending = False
            compiled.warm_up_in_background()
