"""``BusyRouter``: Serve's request router over ``actors.scheduling.routing.rank``.

Set per deployment (``request_router_config.request_router_class:
actors.router:BusyRouter`` in deploy.yaml). Each replica publishes ``{"busy", "speed"}`` as
its routing stats (``record_routing_stats``, every ``request_routing_stats_period_s``); this
router counts the requests it sent and has not seen finish, remembers replicas whose calls
failed, and returns one replica per rank so that its choice, not Serve's queue probe, decides.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from typing import Any

from ray.serve.config import RequestRouterConfig
from ray.serve.request_router import (
    LocalityMixin,
    PendingRequest,
    ReplicaID,
    ReplicaResult,
    RequestRouter,
    RunningReplica,
)

from actors.scheduling.routing import ReplicaView, RoutingPolicy, rank


class BusyRouter(LocalityMixin, RequestRouter):
    """(LocalityMixin gives ``_self_node_id``: the caller's node.)"""

    def initialize_state(
        self,
        spill_threshold: float = RoutingPolicy.spill_threshold,
        failure_cooldown_s: float = RoutingPolicy.failure_cooldown_s,
        seed: int | None = None,
        **_: Any,
    ) -> None:
        self._policy = RoutingPolicy(spill_threshold, failure_cooldown_s)
        self._rng = random.Random(seed)
        self._sent: Counter[ReplicaID] = Counter()
        self._failed_at: dict[ReplicaID, float] = {}

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        views = [self._view(r) for r in candidate_replicas]
        tiers = rank(views, self._self_node_id, time.monotonic(), self._rng, self._policy)
        return [[by_id[t[0].replica_id]] for t in tiers]

    def _view(self, replica: RunningReplica) -> ReplicaView:
        stats = replica.routing_stats or {}
        cached = self._replica_queue_len_cache.get(replica.replica_id)
        queue = max(self._sent[replica.replica_id], cached or 0)
        return ReplicaView(
            replica_id=replica.replica_id.unique_id,
            node_id=replica.node_id,
            queue=queue,
            busy=float(stats.get("busy", 0.0)),
            speed=float(stats.get("speed", 1.0)),
            failed_at=self._failed_at.get(replica.replica_id),
        )

    def on_request_routed(
        self, pending_request: PendingRequest, replica_id: ReplicaID, result: ReplicaResult
    ) -> None:
        self._sent[replica_id] += 1

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        if self._sent[replica_id] > 0:
            self._sent[replica_id] -= 1

    def on_replica_actor_unavailable(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_unavailable(replica_id)
        self._failed_at[replica_id] = time.monotonic()

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self._sent.pop(replica_id, None)
        self._failed_at.pop(replica_id, None)


#: The model deployments' default router (deploy.yaml may tune it): stats every second.
BUSY_ROUTER = RequestRouterConfig(
    request_router_class="actors.router:BusyRouter",
    request_routing_stats_period_s=1.0,
)


class RoundRobinRouter(RequestRouter):
    """A baseline for comparisons (``bench/scheduler.py``): every replica in turn, blind to
    load, speed and locality."""

    def initialize_state(self, **_: Any) -> None:
        self._next = 0

    async def choose_replicas(
        self,
        candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        ordered = sorted(candidate_replicas, key=lambda r: r.replica_id.unique_id)
        if not ordered:
            return []
        start = self._next % len(ordered)
        self._next += 1
        return [[r] for r in ordered[start:] + ordered[:start]]
