"""What the pipeline needs from the model deployments, as small protocols.

The builder passes adapters over Serve handles (``serve_app.handles``); tests can pass plain
objects. Every method takes the call's context: adapters bound each attempt by its remaining
time and raise the pipeline's errors (``serve_app.pipeline.errors``), never Ray's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from cache import MultiLevelCache, Quantisation
from domain import DispatchWeights
from etr import Prediction
from planner.dispatch_round import Assigned
from planner.pdptw.instance import PdptwInstance
from planner.round_to_arrays import RoundArrays
from serve_app.pipeline.context import CallContext


class Solver(Protocol):
    async def solve_round(
        self,
        arrays: RoundArrays,
        weights: DispatchWeights,
        etr_floor: np.ndarray | None,
        improve_routes: bool,
        ctx: CallContext,
    ) -> Assigned:
        """One hop: price, assign, insert and improve (``planner.dispatch_round.solve_round``)."""
        ...

    async def solve_pdptw(
        self, instance: PdptwInstance, time_limit_s: float, seed: int, ctx: CallContext
    ) -> dict[str, Any]:
        """A static solve's summary: instance, vehicles, distance, feasible, seconds, routes."""
        ...


class EtrModel(Protocol):
    async def predict(
        self, features: np.ndarray, ctx: CallContext, version: str | None = None
    ) -> Prediction:
        """Minutes float32[k] for features float32[k, 39], and the version that computed them
        (one version for the whole answer). version : a loaded version to answer with (None:
        the serving one); NotFound when it is not loaded."""
        ...

    async def model_version(self) -> str:
        """The version answering now, as far as this caller knows (the cache keys' version)."""
        ...

    async def refresh_ahead(self) -> None:
        """Bring what this caller knows of the model (its version; a local copy's
        configuration) up to date where it is due within half its refresh period: a hop,
        started where it can run beside other work (a round's body being read), so that the
        ETR stage finds it fresh instead of waiting for it."""
        ...

    @property
    def computes_here(self) -> bool:
        """Whether rows are computed in this process, at microseconds each (then caching rows
        costs more than computing them, and the pipeline does not)."""
        ...


@dataclass
class ReplicaCache:
    """The replica's result cache as the pipeline uses it, and how long its entries live (ETR
    rows and answers: ``ttl_s``; static solutions: ``solve_ttl_s``). Built from the app's
    args by ``serve_app.cache_setup.build_cache``."""

    levels: MultiLevelCache
    ttl_s: float
    quant: Quantisation
    redis_url: str | None
    solve_ttl_s: float

    def describe(self) -> dict[str, Any]:
        stats = self.levels.stats
        return {
            "levels": "l1+l2" if self.redis_url else "l1",
            "l1_bytes": self.levels.l1.bytes_held,
            "hits": {f"{lvl}:{ns}": n for (lvl, ns), n in stats.hits.items()},
            "misses": dict(stats.misses),
            "redis_errors": stats.redis_errors,
            "decode_errors": stats.decode_errors,
            "rejected": dict(stats.rejected),
            "pool_busy": stats.pool_busy,
            "breaker": None if self.levels.l2 is None else self.levels.l2.breaker.state.value,
        }
