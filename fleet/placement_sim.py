"""A placement plan under a request trace, on the fleet's discrete-event engine.

The packer's plan (``placement.packer.Plan``) is checked by the same simulator that runs the
fleet day (``fleet.engine.FleetSim``), with every replica of the plan running all the time
(the ``fixed`` scaler) and Serve's defaults in front of them: power of two choices on queue
length, one FIFO per replica, no admission lanes. Per deployment: arrivals (Poisson, or
bursty: a two-state modulated Poisson process at 1.5x the mean rate 20% of the time and
0.875x otherwise, phases of a second on average), dynamic batching on each replica (a batch
starts when it is full or its oldest request has waited ``batch_wait_ms``), call time drawn
from a log-normal with the profile's p50 and p99 at that batch size on the replica's card
type, divided by the replica's share of its card. Outputs: per deployment SLO attainment
(fraction of requests within the p99 target), observed p50/p99; per card the busy fraction.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from typing import Literal

from devices.catalog import GpuType
from devices.profiles import ProfileSet
from domain import TrafficClass
from fleet.engine import FleetSim, Policy, SimDeployment, SimSettings, Slot
from placement.inventory import Demand
from placement.packer import Plan

ArrivalPattern = Literal["poisson", "bursty"]
#: Serve's defaults in front of a plan's replicas, every one running all the time.
SERVE_DEFAULTS = Policy("placement check", router="pow2", scaler="fixed", classes=False)
#: A p99 is this many standard deviations above the median of a normal.
_Z99 = 2.326


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


def simulate_placement(
    plan: Plan,
    demand: Demand,
    profiles: ProfileSet,
    duration_s: float = 20.0,
    arrivals: ArrivalPattern = "poisson",
    seed: int = 0,
    warmup_s: float = 2.0,
) -> SimResult:
    """Run every deployment of ``plan`` for ``duration_s`` simulated seconds (requests that
    arrive in the first ``warmup_s`` are not counted). Raises ValueError when the plan has no
    replica of a deployment in ``demand``."""
    rng = random.Random(seed)
    deployments, stream = [], []
    for k, m in enumerate(demand.models):
        reps = [r for r in plan.replicas if r.config.deployment == m.deployment]
        if not reps:
            raise ValueError(f"the plan has no replica of {m.deployment}")
        slots = tuple(
            Slot(
                m.deployment,
                r.card,
                plan.cards[r.card].node,
                plan.cards[r.card].type,
                r.config.batch,
                r.config.share,
            )
            for r in reps
        )
        deployments.append(
            SimDeployment(
                m.deployment, m.profile, m.p99_ms / 1e3, math.inf, slots, m.batch_wait_ms / 1e3
            )
        )
        rows = m.rows_per_request
        for t in arrival_times(m.rate_rps, duration_s, arrivals, rng):
            stream.append((t, m.deployment, TrafficClass.ONLINE, rows, rows, k))
    stream.sort(key=lambda a: a[0])

    @functools.cache
    def call(model: str, gpu: GpuType, rows: float) -> tuple[float, float]:
        profile = profiles.get(model, gpu.name)
        p50 = profile.latency_ms(int(rows), "p50")
        p99 = max(profile.latency_ms(int(rows), "p99"), p50)
        return p50, math.log(p99 / p50) / _Z99

    sim = FleetSim(
        deployments,
        SERVE_DEFAULTS,
        SimSettings(record_requests=True, drain_s=math.inf),
        lambda model, gpu, rows: call(model, gpu, rows)[0],
        lambda gpu: 1.0,
        seed=rng.randrange(2**32),
        call_sigma=lambda model, gpu, rows: call(model, gpu, rows)[1],
    )
    sim.run(stream, duration_s)
    latencies: list[list[float]] = [[] for _ in demand.models]
    for arrival, k, latency in sim.out.requests:
        if arrival >= warmup_s:
            latencies[k].append(latency)
    outcomes = {}
    for m, lat in zip(demand.models, latencies, strict=True):
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
    card_busy = {c: 0.0 for c in plan.by_card()}
    for reps in sim.replicas.values():
        for rep in reps:
            card_busy[rep.card] += rep.busy_s * rep.slot.share / duration_s
    return SimResult(outcomes, card_busy)
