"""Busy-driven autoscaling: replicas to run, from how busy the running ones are.

Each replica reports its Busy split by traffic class (the share of its window spent on online
and on offline work). Demand, in replica-equivalents, is Busy x replicas; the policy runs
enough replicas that Busy would sit at ``target_busy``. Online work is protected: offline
demand alone may add at most ``offline_max_share`` of ``max_replicas`` on top of what online
demand needs, so a batch job cannot grow the fleet unbounded, and it never shrinks what online
needs. Hysteresis: scale up once Busy stays above ``target + band`` for ``upscale_delay_s``,
down once below ``target - band`` for ``downscale_delay_s``; in the band, hold.

Pure: numbers in, (replicas, state) out; Serve's adapter is ``actors.autoscaling``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class BusyPolicy:
    target_busy: float = 0.6
    band: float = 0.15
    min_replicas: int = 1
    max_replicas: int = 4
    upscale_delay_s: float = 0.0
    downscale_delay_s: float = 30.0
    offline_max_share: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.target_busy < 1 or not 0 <= self.band < self.target_busy:
            raise ValueError("need 0 < target_busy < 1 and 0 <= band < target_busy")
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError("need 0 <= min_replicas <= max_replicas")
        if not 0 <= self.offline_max_share <= 1:
            raise ValueError("offline_max_share must be in [0, 1]")


@dataclass
class ScalingState:
    """What the policy remembers between decisions (Serve hands it back each tick)."""

    above_since: float | None = None
    below_since: float | None = None
    last: dict[str, float] = field(default_factory=dict)


def desired_replicas(
    current: int,
    busy_online: float,
    busy_offline: float,
    now: float,
    policy: BusyPolicy,
    state: ScalingState | None = None,
) -> tuple[int, ScalingState]:
    """Replicas to run. busy_online, busy_offline : the replicas' mean Busy per class (0..1,
    together at most 1); now : seconds (any monotonic clock)."""
    state = state or ScalingState()
    current = max(current, 0)
    online = max(0.0, busy_online) * current  # replica-equivalents of work
    offline = max(0.0, busy_offline) * current
    need_online = math.ceil(online / policy.target_busy - 1e-9)
    need_all = math.ceil((online + offline) / policy.target_busy - 1e-9)
    offline_room = math.floor(policy.offline_max_share * policy.max_replicas)
    wanted = min(need_all, max(need_online, policy.min_replicas) + offline_room)
    wanted = max(policy.min_replicas, min(policy.max_replicas, max(wanted, need_online)))
    busy = (online + offline) / current if current else (1.0 if online + offline else 0.0)
    state.last = {"busy": busy, "need_online": need_online, "need_all": need_all}
    if current < policy.min_replicas:
        return policy.min_replicas, state
    if busy > policy.target_busy + policy.band and wanted > current:
        state.below_since = None
        state.above_since = now if state.above_since is None else state.above_since
        if now - state.above_since >= policy.upscale_delay_s:
            state.above_since = None
            return wanted, state
        return current, state
    if busy < policy.target_busy - policy.band and wanted < current:
        state.above_since = None
        state.below_since = now if state.below_since is None else state.below_since
        if now - state.below_since >= policy.downscale_delay_s:
            state.below_since = None
            return wanted, state
        return current, state
    state.above_since = state.below_since = None
    return max(policy.min_replicas, min(policy.max_replicas, current)), state
