"""Which replica gets a request: local first, then the earliest expected finish.

Meituan routes to the local card first and spills to other nodes by power-of-two choices when
the local one is full or broken; HighService sends each request to the idlest worker. This
ranks replicas so: among replicas on the caller's node, two are sampled and the one expected to
finish a new request soonest wins, unless even that one is above ``spill_threshold``; then two
are sampled from the other nodes and the better of the two choices wins. "Expected finish"
counts the work ahead (requests sent and not finished, plus the replica's own Busy) in units of
its own speed, so a replica on a GPU type half as fast gets half the traffic; a replica that
failed a call recently is passed over while others remain.

Pure: replica views in, ranked tiers out; the Serve adapter is ``actors.router``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ReplicaView:
    """What the router knows of a replica.

    queue : requests sent to it and not finished; busy : its own Busy, 0..1 (routing stats);
    speed : throughput relative to the reference device (1.0; a GPU type twice as slow 0.5);
    failed_at : when a call to it last failed (monotonic seconds), or None.
    """

    replica_id: str
    node_id: str
    queue: int = 0
    busy: float = 0.0
    speed: float = 1.0
    failed_at: float | None = None

    def expected_finish(self) -> float:
        """A new request's finish, in the reference device's call times."""
        return (self.queue + self.busy + 1.0) / max(self.speed, 1e-6)


@dataclass(frozen=True)
class RoutingPolicy:
    """spill_threshold : a local replica whose expected finish is above this (reference call
    times) is passed over for the best of all nodes; failure_cooldown_s : how long a failed
    replica is avoided; sample : replicas drawn per decision (power of choices)."""

    spill_threshold: float = 3.0
    failure_cooldown_s: float = 5.0
    sample: int = 2


def rank(
    replicas: Sequence[ReplicaView],
    local_node: str | None,
    now: float,
    rng: random.Random,
    policy: RoutingPolicy = RoutingPolicy(),
) -> list[list[ReplicaView]]:
    """Tiers to try in order, one replica each: the choice first, then the rest by expected
    finish (fallbacks when the choice turns out full). Empty when there are no replicas."""
    if not replicas:
        return []
    healthy = [
        r for r in replicas if r.failed_at is None or now - r.failed_at >= policy.failure_cooldown_s
    ] or list(replicas)
    local = [r for r in healthy if local_node is not None and r.node_id == local_node]
    remote = [r for r in healthy if r not in local]
    choice = _best_of_sample(local, rng, policy.sample) if local else None
    if remote and (choice is None or choice.expected_finish() > policy.spill_threshold):
        spill = _best_of_sample(remote, rng, policy.sample)
        if choice is None or spill.expected_finish() < choice.expected_finish():
            choice = spill
    rest = sorted((r for r in healthy if r is not choice), key=ReplicaView.expected_finish)
    return [[choice], *([r] for r in rest)]


def _best_of_sample(pool: Sequence[ReplicaView], rng: random.Random, k: int) -> ReplicaView:
    sampled = rng.sample(list(pool), min(k, len(pool)))
    return min(sampled, key=lambda r: (r.expected_finish(), -r.speed))
