"""Packing replicas onto cards: an exact MILP, a batch-aware heuristic, and two baselines.

The model of a replica (``ReplicaConfig``): it runs on one card of a type with a compute
``share`` of that card (0.25, 0.5 or 1; co-located replicas time-slice, so its calls take
latency / share) and a ``batch`` (max rows per call). Its device memory is the profile's
context + weights + workspace + batch x per-row activations: every process pays its own CUDA
context. Its p99 estimate is batch wait + p99(call) / share + the queueing tail at its
utilisation (``queue_p99_ms``); it serves at most ``capacity_rps`` (full batches) and is
planned at the utilisation that keeps its p99 estimate on target (``candidate_configs``), at
most ``RHO_MAX``; the simulator checks the p99 the estimate promises.

A plan never over-commits a card: shares sum to <= 1 and memory to <= the card's memory
(``Plan.check``). All replicas of one deployment share one config (one Serve deployment has
one set of ``ray_actor_options``), which is also what ``placement.emit`` writes.

Methods: ``milp`` (scipy/HiGHS, exact; minimises cards or cost, falls back to the heuristic when
it does not finish within its time limit), ``heuristic`` (per model the config with the least
card-share x price, then first-fit decreasing by share), ``ffd`` (baseline: a fixed batch of 8
and half a card per replica, as fractional ``num_gpus: 0.5`` is commonly used, packed
first-fit decreasing by memory) and ``one_per_gpu`` (baseline: every replica a whole card).
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from devices.profiles import ModelProfile, ProfileSet
from placement.inventory import Card, Demand, Inventory, ModelDemand

SHARES = (0.25, 0.5, 1.0)
RHO_MAX = 0.85
QUEUE_SAFETY = 1.0
FFD_BATCH = 8
FFD_SHARE = 0.5

Objective = Literal["cards", "cost"]


class PlacementInfeasible(RuntimeError):
    """No plan meets every target with the cards available (the message says which model)."""


@dataclass(frozen=True)
class ReplicaConfig:
    deployment: str
    gpu_type: str
    batch: int  # rows per call, at most
    share: float  # of one card's compute
    memory_mb: float
    capacity_rps: float  # requests/s at full utilisation
    p99_est_ms: float
    replicas_needed: int  # to carry the deployment's rate at RHO_MAX


@dataclass(frozen=True)
class PlacedReplica:
    config: ReplicaConfig
    card: int  # Card.id


@dataclass
class Plan:
    method: str
    cards: list[Card]
    replicas: list[PlacedReplica]
    solve_s: float = 0.0
    optimal: bool | None = None
    notes: list[str] = field(default_factory=list)

    def by_card(self) -> dict[int, list[PlacedReplica]]:
        out: dict[int, list[PlacedReplica]] = defaultdict(list)
        for r in self.replicas:
            out[r.card].append(r)
        return dict(out)

    def cards_used(self) -> int:
        return len(self.by_card())

    def cost_per_hour(self) -> float:
        return sum(self.cards[c].type.price_per_hour for c in self.by_card())

    def configs(self) -> dict[str, ReplicaConfig]:
        return {r.config.deployment: r.config for r in self.replicas}

    def check(self) -> None:
        """Raise PlacementInfeasible if any card is over-committed in share or memory."""
        for card_id, reps in self.by_card().items():
            card = self.cards[card_id]
            share = sum(r.config.share for r in reps)
            mem = sum(r.config.memory_mb for r in reps)
            if r := next((r for r in reps if r.config.gpu_type != card.type.name), None):
                raise PlacementInfeasible(f"{r.config.deployment} planned for the wrong type")
            if share > 1 + 1e-9 or mem > card.type.memory_mb + 1e-6:
                raise PlacementInfeasible(
                    f"card {card} over-committed: share {share:.2f}, memory {mem:.0f} MiB"
                )


def queue_p99_ms(rho: float, call_ms: float) -> float:
    """p99 of the wait for earlier batches at utilisation ``rho`` (ms).

    Batches are the jobs of a single server with near-constant service ``call_ms``; the
    heavy-traffic M/G/1 tail P(W > t) ~ rho exp(-2 (1 - rho) t / (rho s)) (service variation
    neglected) gives t_99 = rho s / (2 (1 - rho)) ln(100 rho), zero when rho <= 1%. That
    approximation is for heavy traffic; at light load the tail is the call in progress (busy
    more than 1% of the time: a p99 request finds one running), so that call is added.
    """
    if rho <= 0.01:
        return 0.0
    return call_ms + QUEUE_SAFETY * rho * call_ms / (2 * (1 - rho)) * math.log(100 * rho)


def candidate_configs(
    demand: ModelDemand, profile: ModelProfile, gpu_memory_mb: int, shares=SHARES
) -> list[ReplicaConfig]:
    """Per share, the batch that needs the fewest replicas with the p99 estimate on target
    (ties: ``_preference``).

    For each batch the utilisation a replica may run at is the largest (<= RHO_MAX) whose
    estimate wait + p99(call) + queue_p99_ms(rho) meets the target: a batch that is fast
    relative to the target may be run hot, a slow one only cool ("squishy" packing).
    """
    out = []
    for share in shares:
        best: ReplicaConfig | None = None
        for batch in profile.batches():
            if batch < demand.rows_per_request:
                continue
            memory = profile.memory_mb(batch)
            call50 = profile.latency_ms(batch, "p50") / share
            call99 = profile.latency_ms(batch, "p99") / share
            fixed = demand.batch_wait_ms + call99
            if memory > gpu_memory_mb or fixed > demand.p99_ms:
                continue
            lo, hi = 0.0, RHO_MAX
            for _ in range(30):  # bisect the hottest utilisation on target
                mid = (lo + hi) / 2
                lo, hi = (
                    (mid, hi) if fixed + queue_p99_ms(mid, call50) <= demand.p99_ms else (lo, mid)
                )
            if lo < 0.02:
                continue
            capacity = (batch // demand.rows_per_request) / (call50 / 1e3)
            peak = demand.rate_rps * demand.burst_factor
            needed = math.ceil(peak / (lo * capacity))
            rho = peak / (needed * capacity)
            cfg = ReplicaConfig(
                demand.deployment,
                profile.device_type,
                batch,
                share,
                memory,
                capacity,
                fixed + queue_p99_ms(rho, call50),
                needed,
            )
            if best is None or _preference(cfg) < _preference(best):
                best = cfg
        if best is not None:
            out.append(best)
    return out


#: Memory differences smaller than this do not decide between two batch sizes (MiB).
MEMORY_GRAIN_MB = 64


def _preference(cfg: ReplicaConfig) -> tuple[int, int, int]:
    """Fewest replicas first, then least memory (to the grain), then the LARGEST batch: the
    ETR batcher never waits to fill a batch (``actors.etr_model``), so a larger cap costs
    nothing at low load and absorbs bursts; a cap of 1 would split every multi-row request
    into one call per row."""
    return (cfg.replicas_needed, math.ceil(cfg.memory_mb / MEMORY_GRAIN_MB), -cfg.batch)


def _configs_by_type(
    demand: Demand,
    profiles: ProfileSet,
    inventory: Inventory,
    shares=SHARES,
    types_of: dict[str, set[str]] | None = None,
) -> dict[str, list[ReplicaConfig]]:
    types = {c.type.name: c.type for c in inventory.cards()}
    out: dict[str, list[ReplicaConfig]] = {}
    for m in demand.models:
        allowed = (types_of or {}).get(m.deployment)
        cfgs = [
            cfg
            for t in types.values()
            if allowed is None or t.name in allowed
            for cfg in candidate_configs(m, profiles.get(m.profile, t.name), t.memory_mb, shares)
        ]
        if not cfgs:
            raise PlacementInfeasible(
                f"{m.deployment}: no GPU type meets p99 {m.p99_ms} ms at any batch and share"
            )
        out[m.deployment] = cfgs
    return out


def _price(card: Card, objective: Objective) -> float:
    return 1.0 if objective == "cards" else card.type.price_per_hour


def plan_milp(
    inventory: Inventory,
    demand: Demand,
    profiles: ProfileSet,
    objective: Objective = "cards",
    time_limit_s: float = 1.0,
    types_of: dict[str, set[str]] | None = None,
) -> Plan:
    """Exact: choose one config per deployment and replicas per card, fewest cards (or cost).
    types_of : per deployment, the card types it may use (default: any).

    Falls back to ``plan_heuristic`` (noted in ``Plan.notes``) when HiGHS finds no solution in
    ``time_limit_s``; returns its best solution (``optimal=False``) when it found one but could
    not prove it optimal in time.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    t0 = time.perf_counter()
    cards = inventory.cards()
    configs = _configs_by_type(demand, profiles, inventory, types_of=types_of)
    cfg_list = [(m, k, cfg) for m, cfgs in configs.items() for k, cfg in enumerate(cfgs)]
    # Variables: w[config] binary, x[config, card] integer, y[card] binary.
    n_w = len(cfg_list)
    x_index: list[tuple[int, int]] = [
        (i, c.id)
        for i, (_, _, cfg) in enumerate(cfg_list)
        for c in cards
        if c.type.name == cfg.gpu_type
    ]
    n_x, n_y = len(x_index), len(cards)
    n = n_w + n_x + n_y
    cost = np.zeros(n)
    cost[n_w + n_x :] = [_price(c, objective) for c in cards]
    cost[n_w : n_w + n_x] = 1e-4 * min(cost[n_w + n_x :].min(), 1.0)  # fewer replicas on a tie
    rows: list[tuple[dict[int, float], float, float]] = []
    models = list(configs)
    for m in models:  # exactly one config per deployment
        rows.append(({i: 1.0 for i, (mm, _, _) in enumerate(cfg_list) if mm == m}, 1, 1))
    x_of_cfg: dict[int, list[int]] = defaultdict(list)
    x_of_card: dict[int, list[int]] = defaultdict(list)
    for j, (i, card_id) in enumerate(x_index):
        x_of_cfg[i].append(n_w + j)
        x_of_card[card_id].append(n_w + j)
    for i, (_, _, cfg) in enumerate(cfg_list):
        need = cfg.replicas_needed
        row = {v: 1.0 for v in x_of_cfg[i]}
        row[i] = -float(need)
        rows.append((row, 0, np.inf))  # enough replicas of the chosen config
        for v in x_of_cfg[i]:  # and none of the others
            rows.append(({v: 1.0, i: -float(need)}, -np.inf, 0))
    for c in cards:
        y = n_w + n_x + c.id
        share = {v: cfg_list[x_index[v - n_w][0]][2].share for v in x_of_card[c.id]}
        mem = {v: cfg_list[x_index[v - n_w][0]][2].memory_mb for v in x_of_card[c.id]}
        rows.append(({**share, y: -1.0}, -np.inf, 0))
        rows.append(({**mem, y: -float(c.type.memory_mb)}, -np.inf, 0))
    for a, b in itertools.pairwise(cards):  # symmetry: use same-type cards in order
        if a.type.name == b.type.name and a.node == b.node:
            rows.append(({n_w + n_x + a.id: 1.0, n_w + n_x + b.id: -1.0}, 0, np.inf))
    A = lil_matrix((len(rows), n))
    lo, hi = np.empty(len(rows)), np.empty(len(rows))
    for r, (coefs, lb, ub) in enumerate(rows):
        for v, coef in coefs.items():
            A[r, v] = coef
        lo[r], hi[r] = lb, ub
    upper = np.concatenate(
        [np.ones(n_w), [cfg_list[i][2].replicas_needed for i, _ in x_index], np.ones(n_y)]
    )
    res = milp(
        cost,
        constraints=LinearConstraint(A.tocsr(), lo, hi),
        integrality=np.ones(n),
        bounds=Bounds(np.zeros(n), upper),
        options={"time_limit": time_limit_s, "disp": False},
    )
    if res.x is None:
        plan = plan_heuristic(inventory, demand, profiles, objective)
        plan.notes.append(f"milp: {res.message}; heuristic used")
        plan.solve_s = time.perf_counter() - t0
        return plan
    replicas = []
    for j, (i, card_id) in enumerate(x_index):
        replicas += [PlacedReplica(cfg_list[i][2], card_id)] * round(res.x[n_w + j])
    plan = Plan("milp", cards, replicas, time.perf_counter() - t0, optimal=res.status == 0)
    if res.status != 0:
        plan.notes.append(f"milp: {res.message}")
    return plan


def plan_heuristic(
    inventory: Inventory, demand: Demand, profiles: ProfileSet, objective: Objective = "cards"
) -> Plan:
    """Batch-aware greedy: per deployment the config with the least share x price in total,
    then first-fit decreasing by share, opening the cheapest free card of the needed type;
    a deployment whose type runs out tries its next config."""
    t0 = time.perf_counter()
    cards = inventory.cards()
    configs = _configs_by_type(demand, profiles, inventory)
    price = {c.type.name: _price(c, objective) for c in cards}

    def weight(cfg: ReplicaConfig) -> float:
        return cfg.replicas_needed * cfg.share * price[cfg.gpu_type]

    ranked = {m: sorted(cfgs, key=weight) for m, cfgs in configs.items()}
    choice = {m: 0 for m in ranked}
    while True:
        chosen = [ranked[m][choice[m]] for m in ranked]
        placed, failed = _first_fit(cards, chosen, key=lambda c: (-c.share, -c.memory_mb))
        if failed is None:
            return Plan("heuristic", cards, placed, time.perf_counter() - t0)
        if choice[failed] + 1 >= len(ranked[failed]):
            raise PlacementInfeasible(f"{failed}: not enough cards for any of its configs")
        choice[failed] += 1


def plan_ffd(
    inventory: Inventory, demand: Demand, profiles: ProfileSet, share: float = FFD_SHARE
) -> Plan:
    """Baseline: batch fixed at 8 (nearest profiled size), ``share`` of a card per replica
    (half, by default), the first type in the inventory that meets the target, first-fit
    decreasing by memory."""
    t0 = time.perf_counter()
    cards = inventory.cards()
    types = list(dict.fromkeys(c.type.name for c in cards))
    chosen = []
    for m in demand.models:
        for t in types:
            p = profiles.get(m.profile, t)
            batch = min(p.batches(), key=lambda b: abs(b - FFD_BATCH))
            fixed = p.model_copy(update={"points": [q for q in p.points if q.batch == batch]})
            mem = next(c.type.memory_mb for c in cards if c.type.name == t)
            cfgs = candidate_configs(m, fixed, mem, shares=(share,))
            if cfgs:
                chosen.append(cfgs[0])
                break
        else:
            raise PlacementInfeasible(f"{m.deployment}: FFD's fixed config meets no target")
    placed, failed = _first_fit(cards, chosen, key=lambda c: (-c.memory_mb,))
    if failed is not None:
        raise PlacementInfeasible(f"{failed}: FFD ran out of cards")
    return Plan("ffd", cards, placed, time.perf_counter() - t0)


def plan_one_per_gpu(
    inventory: Inventory, demand: Demand, profiles: ProfileSet, objective: Objective = "cards"
) -> Plan:
    """Baseline: every replica owns a whole card (best batch; fewest cards, then price)."""
    t0 = time.perf_counter()
    cards = inventory.cards()
    configs = _configs_by_type(demand, profiles, inventory, shares=(1.0,))
    price = {c.type.name: _price(c, objective) for c in cards}
    chosen = [
        min(cfgs, key=lambda c: (c.replicas_needed * price[c.gpu_type], c.replicas_needed))
        for cfgs in configs.values()
    ]
    placed, failed = _first_fit(cards, chosen, key=lambda c: (-c.memory_mb,))
    if failed is not None:
        raise PlacementInfeasible(f"{failed}: one model per GPU ran out of cards")
    return Plan("one_per_gpu", cards, placed, time.perf_counter() - t0)


def _first_fit(
    cards: list[Card], chosen: list[ReplicaConfig], key
) -> tuple[list[PlacedReplica], str | None]:
    """Place ``replicas_needed`` of each config, sorted by ``key``, first fit on open cards
    of the right type before opening a new one (cheapest first). (placed, None) or
    (partial, deployment that did not fit)."""
    share_left = {c.id: 1.0 for c in cards}
    mem_left = {c.id: float(c.type.memory_mb) for c in cards}
    opened: list[int] = []
    unopened = sorted(cards, key=lambda c: (c.type.price_per_hour, c.id))
    todo = sorted(
        (cfg for cfg in chosen for _ in range(cfg.replicas_needed)),
        key=lambda c: (*key(c), c.deployment),
    )
    placed = []
    for cfg in todo:

        def fits(cid: int, cfg: ReplicaConfig = cfg) -> bool:
            return share_left[cid] + 1e-9 >= cfg.share and mem_left[cid] + 1e-6 >= cfg.memory_mb

        target = next(
            (cid for cid in opened if cards[cid].type.name == cfg.gpu_type and fits(cid)), None
        )
        if target is None:
            new = next((c for c in unopened if c.type.name == cfg.gpu_type and fits(c.id)), None)
            if new is None:
                return placed, cfg.deployment
            unopened.remove(new)
            opened.append(new.id)
            target = new.id
        share_left[target] -= cfg.share
        mem_left[target] -= cfg.memory_mb
        placed.append(PlacedReplica(cfg, target))
    return placed, None


PLANNERS = {
    "milp": plan_milp,
    "heuristic": plan_heuristic,
    "ffd": plan_ffd,
    "one_per_gpu": plan_one_per_gpu,
}
