"""Busy-driven autoscaling: replicas to run, from how busy the running ones are.

Each replica reports its Busy split by traffic class (the share of its window spent on online
and on offline work). Demand, in replica-equivalents, is Busy x replicas; the policy runs
enough replicas that Busy would sit at ``target_busy``. Online work is protected: offline
demand alone may add at most ``offline_max_share`` of ``max_replicas`` on top of what online
demand needs, so a batch job cannot grow the fleet unbounded, and it never shrinks what online
needs. Busy cannot exceed 1, so past ``saturated_busy`` it no longer says how much more is
needed; and a queue says it sooner (Busy is a mean over a window, a queue is there at once;
and a device fed by a busy host never quite reaches Busy 1). So more than ``queue_target``
online requests per replica (running and queued) is saturation too. Saturated, the policy
sizes from the queue instead, ``queue_target`` requests per replica, and at least doubles
(TCP's slow start): each signal where it says something, Busy below saturation (where queues
are short), the queue above it. Serve counts requests without their class, so the queue is
split between the classes as their work is (an offline backlog is not online pressure).
Hysteresis, one-sided: up as soon as Busy passes the target (late costs queued requests),
down only below ``target - band`` (waiting costs only idle replicas). How long a condition
must last before it is acted on is Serve's (``upscale_delay_s`` / ``downscale_delay_s`` of the
deployment's ``autoscaling_config``: it wraps every custom policy), not set twice here.

Pure: numbers in, replicas out; Serve's adapter is ``actors.autoscaling``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BusyPolicy:
    target_busy: float = 0.6
    band: float = 0.15
    min_replicas: int = 1
    max_replicas: int = 4
    offline_max_share: float = 0.5
    saturated_busy: float = 0.95
    queue_target: float = 1.5

    def __post_init__(self) -> None:
        if not 0 < self.target_busy < 1 or not 0 <= self.band < self.target_busy:
            raise ValueError("need 0 < target_busy < 1 and 0 <= band < target_busy")
        if not 0 <= self.min_replicas <= self.max_replicas:
            raise ValueError("need 0 <= min_replicas <= max_replicas")
        if not 0 <= self.offline_max_share <= 1:
            raise ValueError("offline_max_share must be in [0, 1]")


@dataclass(frozen=True)
class Decision:
    """replicas : what to run; the rest says why (for logs and the policy state)."""

    replicas: int
    busy: float
    need_online: int
    need_all: int


def desired_replicas(
    current: int,
    busy_online: float,
    busy_offline: float,
    policy: BusyPolicy,
    requests: float = 0.0,
) -> Decision:
    """Replicas to run. busy_online, busy_offline : the replicas' mean Busy per class (0..1,
    together at most 1); requests : requests at the deployment, running and queued, all
    classes (0 if unknown)."""
    current = max(current, 0)
    online = max(0.0, busy_online) * current  # replica-equivalents of work
    offline = max(0.0, busy_offline) * current
    need_online = math.ceil(online / policy.target_busy - 1e-9)
    need_all = math.ceil((online + offline) / policy.target_busy - 1e-9)
    busy = (online + offline) / current if current else (1.0 if online + offline else 0.0)
    online_requests = requests * online / (online + offline) if online + offline else 0.0
    saturated = current > 0 and (
        online / current >= policy.saturated_busy or online_requests > policy.queue_target * current
    )
    if saturated:
        from_queue = math.ceil(online_requests / policy.queue_target - 1e-9)
        need_online = max(need_online, 2 * current, from_queue)
    offline_room = math.floor(policy.offline_max_share * policy.max_replicas)
    wanted = max(need_online, min(need_all, max(need_online, policy.min_replicas) + offline_room))
    wanted = max(policy.min_replicas, min(policy.max_replicas, wanted))
    if current < policy.min_replicas:
        replicas = policy.min_replicas
    else:
        up = busy > policy.target_busy and wanted > current
        down = busy < policy.target_busy - policy.band and wanted < current
        replicas = wanted if up or down else min(policy.max_replicas, current)
    return Decision(replicas, busy, need_online, need_all)
