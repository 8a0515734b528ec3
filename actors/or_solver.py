"""The OR solver deployment: one call solves a dispatch round on this replica's device.

Stateless: every call brings the round's arrays, so any replica can serve any round and a
replica that dies loses nothing but the call in flight (which the caller may retry: the same
arrays give the same answer). The R x O insertion candidates are made, used and dropped inside
``solve_round``: they never cross a process boundary (on a GPU, never leave the device).

Online rounds and offline static solves share the replicas: a static solve steps aside between
its LNS iterations while an online round computes (``PriorityGate``) and goes on after. The
replica measures its Busy per traffic class and publishes it to the router and the autoscaler
(``actors.replica_load``).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import replace
from typing import Any

import numpy as np
from ray import serve

from actors.abandon import Abandon
from actors.device import GuardSettings, replica_guard
from actors.emulation import EmulatedDevice, Emulation
from actors.errors import DeviceUnhealthy
from actors.faults import replica_id
from actors.offline_process import OfflineSolves
from actors.replica_load import ReplicaLoad
from actors.router import BUSY_ROUTER
from actors.scheduling import PriorityGate
from config import backend_for, get_settings
from domain import DispatchWeights, TrafficClass
from kernels import compiled
from kernels.backend import backend_for_pairs, module_for, resolve_backend
from kernels.streams import class_stream
from planner import generate_round
from planner.dispatch_round import (
    Assigned,
    price_candidates,
    round_arrays,
    solve_round,
)
from planner.round_to_arrays import RoundArrays

#: The most of a call's deadline its watchdog waits for (x-timeout-ms may ask for an hour):
#: past this plus ``watchdog_s`` a round still computing is taken for a wedged device.
MAX_WATCHED_WAIT_S = 120.0


@serve.deployment(
    name="OrSolver",
    ray_actor_options={"num_cpus": 0.5},
    request_router_config=BUSY_ROUTER,
)
class OrSolverDeployment:
    """backend : "auto" | "numpy" | "cupy", None for this process's $ORML_BACKEND (see
    ``kernels.backend.resolve_backend``); guard : the replica's
    ``actors.device.GuardSettings`` as a dict (watchdog, probe timeout, health hold, exit on
    fault, fault injection, stuck alarm); speed : this replica's throughput relative to the
    reference device (the router's weight); emulate : ``actors.emulation.Emulation`` fields to
    sleep a device's call time (experiments only); offline : ``actors.offline_process.
    OfflineSolves`` arguments (priority, processes): where static solves run."""

    def __init__(
        self,
        backend: str | None = None,
        guard: dict[str, Any] | None = None,
        speed: float = 1.0,
        emulate: dict[str, Any] | None = None,
        offline: dict[str, Any] | None = None,
    ) -> None:
        self.settings = GuardSettings(**(guard or {}))
        # Started first: the child imports the solver while this replica warms its kernels.
        self.offline = OfflineSolves(**(offline or {}))
        self.emulated = (
            None if emulate is None else EmulatedDevice(Emulation(**emulate).for_this_node())
        )
        self.load = ReplicaLoad(
            speed=speed if self.emulated is None else self.emulated.emulation.speed,
            window_s=self.settings.busy_window_s,
            stuck_after_s=self.settings.stuck_after_s,
        )
        self.gate = PriorityGate()
        self.replica = replica_id()
        settings = get_settings()
        requested = backend_for(backend)
        self.backend = resolve_backend(requested)
        self.xp = module_for(self.backend)
        # "auto" on a GPU keeps rounds under gpu_min_pairs on the host (backend_for_pairs).
        self._auto = requested == "auto"
        self._gpu_min_pairs = settings.gpu_min_pairs
        _, probe = round_arrays(generate_round(8, 4, seed=123))
        self._probe = probe.to(self.xp)
        self._weights = DispatchWeights()
        # The compiled CPU builds, see check_health: a GPU replica needs them for small rounds.
        self._jit_pending = self.round_backend(0) == "numpy"
        if self._jit_pending:
            compiled.defer()
        # Arming runs the probe: it also warms the kernels (and compiles the CUDA module).
        self.guard = replica_guard(
            "cuda:0" if self.backend == "cupy" else "cpu",
            lambda: price_candidates(self._probe, self._weights).cost,
            self.settings,
        )
        solve_round(self._probe, self._weights)  # and the assignment and insertion path

    def round_backend(self, pairs: int) -> str:
        """Where this replica solves a round of ``pairs`` rider x order pairs."""
        return backend_for_pairs(self.backend, self._auto, pairs, self._gpu_min_pairs)

    def ready(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "replica": replica_id(),
            "healthy": self.guard.healthy,
            "reason": self.guard.reason,
            # Answers are the same either way; a warming replica is only slower.
            "kernel_warming": compiled.warming(),
            "kernel_stage": compiled.warming_stage(),
        }

    def inject_fault(self, kind: str) -> dict[str, Any]:
        """Drills only (see ``actors.faults``); FaultInjectionDisabled unless deployed with it."""
        return {"replica": replica_id(), "at": self.guard.faults.inject(kind)}

    # The request methods are async and run their compute in a worker thread: a Serve hop to
    # an async method skips Serve's thread hand-off of a sync one (bench/serve_load.py), and
    # the event loop stays free for the health check while a device call runs (or wedges).
    async def solve_round(
        self,
        arrays: RoundArrays,
        weights: DispatchWeights,
        etr_floor: np.ndarray | None = None,
        improve_routes: bool = True,
        traffic_class: str = TrafficClass.ONLINE,
        timeout_s: float | None = None,
    ) -> Assigned:
        """The solve stage of a round (``planner.dispatch_round.solve_round``), host arrays out.
        An online round makes a static solve on this replica step aside while it computes.

        timeout_s : how long the caller waits (None: no deadline). The round stops computing
        (``Abandoned``) at its next checkpoint once that has passed or the call is cancelled,
        and its watchdog allows that time plus ``watchdog_s``: a round the caller may wait for
        is never taken for a wedged device."""
        cls = TrafficClass(traffic_class)
        abandon = Abandon(timeout_s)
        args = (arrays, weights, etr_floor, improve_routes, cls, abandon)
        if cls is TrafficClass.ONLINE:
            with self.gate.online(), self.offline.online():
                return await abandon.run(self._solve_round, *args)
        return await abandon.run(self._solve_round, *args)

    def _solve_round(
        self,
        arrays: RoundArrays,
        weights: DispatchWeights,
        etr_floor: np.ndarray | None,
        improve_routes: bool,
        traffic_class: TrafficClass,
        abandon: Abandon,
    ) -> Assigned:
        xp = module_for(self.round_backend(arrays.routes.shape[0] * len(arrays.orders)))

        def compute() -> Assigned:
            # On a GPU an online round's kernels go ahead of an offline round's blocks.
            with class_stream(xp, online=traffic_class is TrafficClass.ONLINE):
                return solve_round(
                    arrays.to(xp),
                    weights,
                    etr_floor=etr_floor,
                    improve_routes=improve_routes,
                    checkpoint=abandon.checkpoint,
                )

        abandon.checkpoint()  # it may have waited in Serve's queue past its deadline
        budget = self.settings.watchdog_s + min(abandon.remaining_s(), MAX_WATCHED_WAIT_S)
        held_since: list[float] = []

        def held() -> Assigned:
            held_since.append(time.perf_counter())  # the device is this call's from here
            return compute()

        with self.load.working(traffic_class), self.guard.watch(budget):
            out = held() if self.emulated is None else self.emulated.run(held)
        # The time the call held the device (an emulated one: inside its lock, the sleep
        # included), apart from the time it waited for it: solve_ms less this is the hop and
        # the replica's queue.
        device_ms = (time.perf_counter() - held_since[0]) * 1e3
        return replace(
            out, solved_by=self.replica, timings_ms={**out.timings_ms, "device_ms": device_ms}
        )

    async def solve_pdptw(
        self, instance: Any, time_limit_s: float, seed: int, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Offline: solve a static PDPTW instance (``planner.pdptw``); a summary with routes.
        It steps aside between LNS iterations while online rounds compute here, and stops
        (``Abandoned``) once its caller has gone (cancelled, or ``timeout_s`` passed)."""
        abandon = Abandon(timeout_s)
        return await abandon.run(self._solve_pdptw, instance, time_limit_s, seed, abandon)

    def _step_aside(self) -> float:
        """Between a static solve's iterations: wait for online work, not counted as busy."""
        if not self.gate.online_active:
            return 0.0
        self.load.pause(TrafficClass.OFFLINE)
        try:
            return self.gate.yield_to_online()
        finally:
            self.load.resume(TrafficClass.OFFLINE)

    def _solve_pdptw(
        self, instance: Any, time_limit_s: float, seed: int, abandon: Abandon
    ) -> dict[str, Any]:
        from planner.pdptw.evaluate import evaluate

        abandon.checkpoint()
        # A solve in a child process is no call on this replica's device: the replica stays
        # responsive, the child is given up at its caller's deadline (``abandon``), and a dead
        # child's replacement takes seconds to start, which must not read as a wedged device.
        watch = (
            contextlib.nullcontext()
            if self.offline.in_children
            else self.guard.watch(time_limit_s + self.settings.watchdog_s)
        )
        with self.load.working(TrafficClass.OFFLINE), watch:
            sol = self.offline.solve(instance, time_limit_s, seed, abandon, self._step_aside)
        ev = evaluate(instance, sol.routes)
        return {
            "instance": instance.name,
            "vehicles": ev.vehicles,
            "distance": ev.distance,
            "feasible": ev.feasible and not sol.unassigned,
            "seconds": sol.seconds,
            "routes": sol.routes,
            "unassigned": sol.unassigned,
        }

    def stats(self) -> dict[str, Any]:
        """Busy per class and how often static solves stepped aside (tests, drills)."""
        return {
            **self.load.autoscaling_stats(),
            "busy": self.load.device.busy(),
            "calls": self.load.device.completed,
            "yields": self.gate.yields + self.offline.yields,
            "yielded_s": self.gate.yielded_s + self.offline.yielded_s,
            "pid": os.getpid(),
            "offline_priority": self.offline.priority,
            "offline_pids": self.offline.pids,
        }

    def record_routing_stats(self) -> dict[str, float]:
        return self.load.routing_stats()

    def record_autoscaling_stats(self) -> dict[str, float]:
        return self.load.autoscaling_stats()

    def __del__(self) -> None:
        offline = getattr(self, "offline", None)
        if offline is not None:
            offline.close()

    async def check_health(self) -> None:
        if self.load.stuck():
            raise DeviceUnhealthy(self.guard.device, "busy with no call finishing (stuck)")
        self.offline.check()  # a static solve's worker that died and could not be replaced
        await self.guard.check_and_hold(self.settings.health_hold_s)
        if self._jit_pending:
            # Loaded once the replica is up, not in __init__: the loader's child process would
            # compete for the CPU with the start of a replacement replica and delay the moment
            # Serve counts it RUNNING. The array loops answer (bit-identically) until then.
            self._jit_pending = False
            compiled.warm_up_in_background()
