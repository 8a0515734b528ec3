"""The pipeline's ports (``serve_app.pipeline.ports``) over Ray Serve deployment handles.

Each call goes through ``Failover`` (retries on another replica, bounded by the request's
deadline) and carries the request's traffic class and remaining time, so the replica can serve
online work first and drop what its caller has given up on.

Large arguments go by reference: in Serve's throughput mode a handle call travels over gRPC,
whose messages are capped (4 MiB by default) and copied; above ``BY_REFERENCE_BYTES`` the
call's arrays go through Ray's object store instead (no cap, zero-copy for NumPy).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import numpy as np
from ray.serve.handle import DeploymentHandle

from actors.errors import VersionNotLoaded
from domain import DispatchWeights
from etr import Prediction
from planner.dispatch_round import Assigned
from planner.pdptw.instance import PdptwInstance
from planner.round_to_arrays import RoundArrays
from serve_app.failover import Failover
from serve_app.pipeline.context import CallContext
from serve_app.pipeline.errors import InvalidInput, NotFound

#: Calls carrying more array bytes than this go through the object store (see module doc).
BY_REFERENCE_BYTES = 1 << 20


class SolverHandle:
    """A ``Solver`` over the OrSolver deployment (``name`` for logs and metrics).

    watchdog_s : added to a static solve's time limit for its per-attempt timeout.
    """

    def __init__(
        self, handle: DeploymentHandle, failover: Failover, name: str, watchdog_s: float
    ) -> None:
        self.handle, self.failover, self.name, self.watchdog_s = handle, failover, name, watchdog_s
        self.calls = 0  # solve_round calls made (hops), for tests and /readyz

    async def solve_round(
        self,
        arrays: RoundArrays,
        weights: DispatchWeights,
        etr_floor: np.ndarray | None,
        improve_routes: bool,
        ctx: CallContext,
    ) -> Assigned:
        handle = self._for(arrays.nbytes)
        self.calls += 1
        return await self.failover.call(
            f"{self.name}.solve_round",
            lambda: handle.solve_round.remote(
                arrays,
                weights,
                etr_floor,
                improve_routes,
                ctx.traffic_class.value,
                max(0.0, ctx.remaining_s()),
            ),
            ctx,
        )

    async def solve_pdptw(
        self, instance: PdptwInstance, time_limit_s: float, seed: int, ctx: CallContext
    ) -> dict[str, Any]:
        return await self.failover.call(
            f"{self.name}.solve_pdptw",
            lambda: self.handle.solve_pdptw.remote(
                instance, time_limit_s, seed, max(0.0, ctx.remaining_s())
            ),
            ctx,
            timeout_s=time_limit_s + self.failover.call_timeout_s,
        )

    async def ready(self) -> dict[str, Any]:
        return await self.handle.ready.remote()

    def _for(self, nbytes: int) -> DeploymentHandle:
        if nbytes > BY_REFERENCE_BYTES:
            return self.handle.options(_by_reference=True)
        return self.handle


class EtrHandle:
    """An ``EtrModel`` over the Etr deployment. The current version is the one that computed
    the latest answer, or that a replica named when asked: asked before the first answer and
    again once ``refresh_s`` has passed (half of it ahead of a round, ``refresh_ahead``),
    since a cache that answers every request would otherwise never learn of a roll. During a
    roll it follows the replicas as they swap.

    The asking is done by a caller after ``refresh_s`` (one ``ready`` hop a second at most;
    a dispatch starts it inside its own request, ``refresh_ahead``): handle calls started from
    a background task outside any request hung the ingress's later calls in Serve's
    throughput mode (Ray 2.60)."""

    def __init__(
        self, handle: DeploymentHandle, failover: Failover, refresh_s: float = 1.0
    ) -> None:
        self.handle, self.failover, self.refresh_s = handle, failover, refresh_s
        self.calls = 0
        self._version: str | None = None
        self._asked_at = -math.inf  # monotonic
        self._asking = asyncio.Lock()  # one ask at a time (only the first is waited for)

    computes_here = False  # a hop away

    async def predict(
        self, features: np.ndarray, ctx: CallContext, version: str | None = None
    ) -> Prediction:
        self.calls += 1
        handle = self.handle
        if features.nbytes > BY_REFERENCE_BYTES:
            handle = handle.options(_by_reference=True)
        try:
            got: Prediction = await self.failover.call(
                "Etr.predict",
                lambda: handle.predict.remote(
                    features, ctx.traffic_class.value, max(0.0, ctx.remaining_s()), version
                ),
                ctx,
            )
        except ValueError as exc:  # the replica's check of the feature rows
            raise InvalidInput.at(("features",), str(exc)) from exc
        except VersionNotLoaded as exc:
            raise NotFound(f"ETR model {exc}") from exc
        self._version = got.model_version
        return got

    async def model_version(self) -> str:
        await self._refresh_past(self.refresh_s)
        assert self._version is not None
        return self._version

    async def refresh_ahead(self) -> None:
        if self._version is not None:  # the first ask is a request's own, within its deadline
            await self._refresh_past(self.refresh_s / 2)

    async def _refresh_past(self, age_s: float) -> None:
        """Ask a replica for the version if none is known or the last ask is ``age_s`` old.
        Only the first call waits for an answer; a refresh already under way is not waited
        for (the version known is used meanwhile)."""
        stale = time.monotonic() - self._asked_at > age_s
        if self._version is None or (stale and not self._asking.locked()):
            async with self._asking:
                if self._version is None or time.monotonic() - self._asked_at > age_s:
                    await self._ask()

    async def _ask(self) -> None:
        self._asked_at = time.monotonic()
        # A refresh is bounded by the refresh period: a request must not wait on a slow
        # replica for a version it already has.
        timeout = self.failover.call_timeout_s if self._version is None else self.refresh_s
        try:
            state = await self.failover.call(
                "Etr.ready", lambda: self.handle.ready.remote(), CallContext.start(timeout)
            )
        except Exception:
            if self._version is None:
                raise
            return  # a refresh: keep the version known, ask again after refresh_s
        self._version = str(state["model_version"])

    async def ready(self) -> dict[str, Any]:
        return await self.handle.ready.remote()
