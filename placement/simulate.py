"""Discrete-event simulation of a plan under a request trace, from the profiles alone.

Per deployment: arrivals (Poisson, or bursty: a two-state modulated Poisson process at 1.5x
the mean rate 20% of the time and 0.875x otherwise, phases of a second on average), routed
like Serve's router (the shorter queue of two replicas drawn at random), dynamic batching on
each replica (a batch starts when it is full or its oldest request has waited
``batch_wait_ms``), call time drawn
from a log-normal with the profile's p50 and p99 at that batch size, divided by the replica's
share of its card. Outputs: per deployment SLO attainment (fraction of requests within the
p99 target), observed p50/p99, mean queue wait; per card the busy fraction.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass
from typing import Literal

from devices.profiles import ProfileSet
from placement.inventory import Demand
from placement.packer import Plan

ArrivalPattern = Literal["poisson", "bursty"]


@dataclass(frozen=True)
class DeploymentOutcome:
    deployment: str
    requests: int
    attainment: float  # fraction within the p99 target
    p50_ms: float
    p99_ms: float
    target_ms: float


@dataclass(frozen=True)
class SimResult:
    deployments: dict[str, DeploymentOutcome]
    card_busy: dict[int, float]  # Card.id -> busy fraction (sum over its replicas x share)

    @property
    def attainment(self) -> float:
        """Request-weighted attainment over all deployments."""
        total = sum(d.requests for d in self.deployments.values())
        return sum(d.attainment * d.requests for d in self.deployments.values()) / max(total, 1)

    @property
    def worst_attainment(self) -> float:
        return min(d.attainment for d in self.deployments.values())


def arrival_times(
    rate: float, duration_s: float, kind: ArrivalPattern, rng: random.Random
) -> list[float]:
    """Arrival times in seconds on [0, duration_s)."""
    out, t = [], 0.0
    if kind == "poisson":
        while (t := t + rng.expovariate(rate)) < duration_s:
            out.append(t)
        return out
    high, phase_end = False, 0.0
    while t < duration_s:
        if t >= phase_end:
            high = rng.random() < 0.2
            phase_end = t + rng.expovariate(1.0)
        r = rate * (1.5 if high else 0.875)
        t += rng.expovariate(r)
        if t < duration_s and t < phase_end + 1e-12:
            out.append(t)
        elif t >= phase_end:
            t = phase_end  # memoryless: restart the clock in the next phase
    return out


def simulate(
    plan: Plan,
    demand: Demand,
    profiles: ProfileSet,
    duration_s: float = 20.0,
    arrivals: ArrivalPattern = "poisson",
    seed: int = 0,
    warmup_s: float = 2.0,
) -> SimResult:
    """Run every deployment of ``plan`` for ``duration_s`` simulated seconds (the first
    ``warmup_s`` are not counted)."""
    rng = random.Random(seed)
    card_busy: dict[int, float] = {c: 0.0 for c in plan.by_card()}
    outcomes = {}
    for m in demand.models:
        reps = [r for r in plan.replicas if r.config.deployment == m.deployment]
        if not reps:
            raise ValueError(f"the plan has no replica of {m.deployment}")
        profile = profiles.get(m.profile, reps[0].config.gpu_type)
        lat, busy = _run_deployment(
            [(r.config.batch, r.config.share) for r in reps],
            profile,
            m.rows_per_request,
            m.batch_wait_ms / 1e3,
            arrival_times(m.rate_rps, duration_s, arrivals, rng),
            warmup_s,
            rng,
        )
        for r, b in zip(reps, busy, strict=True):
            card_busy[r.card] += b * r.config.share / duration_s
        lat.sort()
        n = len(lat)
        ok = sum(1 for x in lat if x * 1e3 <= m.p99_ms)
        outcomes[m.deployment] = DeploymentOutcome(
            m.deployment,
            n,
            ok / n if n else 1.0,
            lat[n // 2] * 1e3 if n else 0.0,
            lat[min(n - 1, int(0.99 * n))] * 1e3 if n else 0.0,
            m.p99_ms,
        )
    return SimResult(outcomes, card_busy)


def _run_deployment(
    replicas: list[tuple[int, float]],
    profile,
    rows: int,
    wait_s: float,
    arrivals: list[float],
    warmup_s: float,
    rng: random.Random,
) -> tuple[list[float], list[float]]:
    """Latencies (s) of requests arriving after warm-up; busy seconds per replica."""
    n = len(replicas)
    queues: list[deque[float]] = [deque() for _ in range(n)]
    busy_until = [0.0] * n
    running = [False] * n
    timer = [math.inf] * n
    busy_s = [0.0] * n
    latencies: list[float] = []
    events: list[tuple[float, int, int]] = []  # (time, kind 0=done 1=timer 2=arrival, replica)
    for t in arrivals:
        heapq.heappush(events, (t, 2, -1))
    params = {}

    def call_time(i: int, batch_rows: int) -> float:
        key = (i, batch_rows)
        if key not in params:
            p50 = profile.latency_ms(batch_rows, "p50")
            p99 = max(profile.latency_ms(batch_rows, "p99"), p50)
            params[key] = (math.log(p50 / 1e3 / replicas[i][1]), math.log(p99 / p50) / 2.326)
        mu, sigma = params[key]
        return rng.lognormvariate(mu, sigma)

    in_batch: list[list[float]] = [[] for _ in range(n)]

    def start(i: int, now: float) -> None:
        per_call = max(1, replicas[i][0] // rows)
        take = [queues[i].popleft() for _ in range(min(per_call, len(queues[i])))]
        in_batch[i] = take
        dt = call_time(i, len(take) * rows)
        running[i], busy_until[i] = True, now + dt
        busy_s[i] += dt
        heapq.heappush(events, (now + dt, 0, i))

    def maybe_start(i: int, now: float) -> None:
        if running[i] or not queues[i]:
            return
        full = len(queues[i]) * rows >= replicas[i][0]
        if full or now >= queues[i][0] + wait_s - 1e-12:
            timer[i] = math.inf
            start(i, now)
        elif timer[i] == math.inf:
            timer[i] = queues[i][0] + wait_s
            heapq.heappush(events, (timer[i], 1, i))

    while events:
        now, kind, i = heapq.heappop(events)
        if kind == 2:
            a, b = rng.randrange(n), rng.randrange(n)
            load_a = len(queues[a]) + running[a]
            load_b = len(queues[b]) + running[b]
            i = a if load_a <= load_b else b
            queues[i].append(now)
            maybe_start(i, now)
        elif kind == 1:
            if timer[i] == now:
                timer[i] = math.inf
                maybe_start(i, now)
        else:
            running[i] = False
            latencies.extend(now - t for t in in_batch[i] if t >= warmup_s)
            in_batch[i] = []
            maybe_start(i, now)
    return latencies, busy_s
