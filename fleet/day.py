"""A fleet day, policy by policy: plans from the packer, the engine run over the same requests.

Policies (all on the same requests, the same call-cost model, the same failures):

- ``ours``            card types and Busy targets per deployment chosen on planning days
                      (``fleet.tune``: the same cities on other real days; the finalists, the
                      mixed choice and each single type's, run jointly there as the packer
                      shares cards), the packer's exact plan within those types, the app's
                      admission lanes, ``BusyRouter``'s ranking, the Busy autoscaler, online
                      before offline;
- ``serve_default``   the same plan, Serve's defaults: no admission, power of two choices on
                      queue length, ``target_ongoing_requests`` autoscaling, one FIFO for
                      every class;
- ``ffd``             first-fit-decreasing placement (fixed batch, half cards; the packer's
                      baseline) with our scheduling at Busy 0.6;
- ``best_single_type`` the cheapest fleet of one card type that meets the SLO (Mélange's
                      comparison), with our scheduling: each type as the packer plans it for
                      the day at Busy 0.6, and the single type tuned on the planning days as
                      ours is; the cheapest of them that meets the SLO on the day run;
- ``serve_default_equal_cost`` Serve's defaults with ``target_ongoing_requests`` searched so
                      that the day costs what ours costs (SLO misses compared at equal cost);
- ``ours_peak_plan``  (asked for by name) the packer's plan for the day's peak on the mixed
                      fleet, Busy 0.6 everywhere: ``ours`` before the planning day;
- ``ours_day``        (asked for by name) the peak plan with each deployment's card type
                      chosen by the day's cost (``day_types``).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from devices.catalog import gpu_types
from devices.profiles import ProfilePoint, ProfileSet
from domain import TrafficClass
from fleet.call_costs import ROOT, ProfileCallCosts
from fleet.demand import KINDS, Arrivals, make_arrivals, make_cities
from fleet.engine import FleetSim, Policy, SimDeployment, SimFailure, SimOutcome, SimSettings, Slot
from fleet.scenario import Scenario
from fleet.tune import (
    Choice,
    Trial,
    choose,
    planning_scenarios,
    preference,
    run_trials,
    single_type_choices,
)
from placement.inventory import Demand, Inventory, ModelDemand
from placement.packer import (
    PlacementInfeasible,
    Plan,
    candidate_configs,
    plan_ffd,
    plan_milp,
)

#: The packer plans for the peak 10-minute rate times this (bursts inside the bin).
BURST_FACTOR = 1.3
PEAK_BIN_S = 600.0
Z99 = 2.326  # the 99th percentile of a standard normal: the jitter's p99 / p50 in log space


@dataclass
class PolicyRun:
    name: str
    plan: Plan
    policy: Policy
    outcome: SimOutcome
    wall_s: float
    note: str = ""


def build_day(scenario: Scenario, mdrp_dir: Path) -> tuple[Arrivals, list, ProfileSet, Demand]:
    rng = np.random.default_rng(scenario.seed)
    cities = make_cities(scenario, mdrp_dir, rng)
    arrivals = make_arrivals(scenario, cities, rng)
    return arrivals, cities, fleet_profiles(scenario, arrivals), fleet_demand(scenario, arrivals)


def call_costs(scenario: Scenario) -> ProfileCallCosts:
    """The scenario's call-cost model: the profiles it names (loaded once per folder)."""
    return _call_costs(str(ROOT / scenario.call_costs.profiles), scenario.call_costs.jitter_sigma)


@lru_cache(maxsize=4)
def _call_costs(root: str, jitter_sigma: float) -> ProfileCallCosts:
    return ProfileCallCosts.load(Path(root), jitter_sigma)


def fleet_profiles(scenario: Scenario, arrivals: Arrivals) -> ProfileSet:
    """Per deployment and fleet type, the packer's profile of a call as the day makes it: the
    model's measured (or derived) profile at the day's batch sizes (ETR) or round sizes
    (rounds: the mean round at p50, the 99th-percentile round x the jitter's p99 at p99)."""
    costs = call_costs(scenario)
    spread = math.exp(Z99 * costs.jitter_sigma)
    out = []
    for k, (name, spec) in enumerate(scenario.deployments.items()):
        mine = (arrivals.deployment == k) & arrivals.online
        work = arrivals.work[mine] if mine.any() else np.ones(1)
        for type_name in scenario.fleet.types:
            gpu = gpu_types()[type_name]
            model = costs.profile(spec.model, type_name)
            if spec.model == "etr":
                rows = scenario.traffic.rows_per_query
                sizes = sorted({min(rows * 2**i, spec.max_batch_rows) for i in range(12)})
                points = [
                    ProfilePoint(
                        batch=b,
                        p50_ms=costs.call_ms(spec.model, gpu, b),
                        p99_ms=costs.call_ms(spec.model, gpu, b) * spread,
                    )
                    for b in sizes
                ]
            else:  # one round per call: its time follows the round's size
                p50 = costs.call_ms(spec.model, gpu, float(np.mean(work)))
                p99 = costs.call_ms(spec.model, gpu, float(np.percentile(work, 99))) * spread
                points = [ProfilePoint(batch=1, p50_ms=p50, p99_ms=max(p99, p50))]
            source = "derived" if model.estimate else f"measured {model.measured}"
            out.append(
                model.model_copy(
                    update={
                        "model": name,
                        "device_type": type_name,
                        "runtime": f"{model.runtime} at the day's sizes",
                        "estimate": model.estimate,
                        "basis": f"{spec.model} on {type_name}, {source}: {model.basis}",
                        "context_mb": float(gpu.context_mb),
                        "points": points,
                        "round_sizes": [],
                    }
                )
            )
    return ProfileSet(out)


def online_rates(arrivals: Arrivals, deployment: int) -> np.ndarray:
    """float64[bins]: a deployment's online requests/s in each PEAK_BIN_S bin of the day."""
    mine = (arrivals.deployment == deployment) & arrivals.online
    bins = np.arange(0.0, arrivals.end_s + PEAK_BIN_S, PEAK_BIN_S)
    return np.histogram(arrivals.t_s[mine], bins=bins)[0] / PEAK_BIN_S


def fleet_demand(scenario: Scenario, arrivals: Arrivals) -> Demand:
    """Per deployment: the peak 10-minute online rate (x BURST_FACTOR) and the SLO."""
    models = []
    for k, (name, spec) in enumerate(scenario.deployments.items()):
        if not ((arrivals.deployment == k) & arrivals.online).any():
            continue
        peak = online_rates(arrivals, k).max()
        rows = scenario.traffic.rows_per_query if spec.model == "etr" else 1
        models.append(
            ModelDemand(
                deployment=name,
                profile=name,
                rate_rps=max(peak, 1e-3),
                p99_ms=spec.slo_ms,
                rows_per_request=rows,
                batch_wait_ms=0.0,
                burst_factor=BURST_FACTOR,
            )
        )
    return Demand(models=models)


def day_types(
    scenario: Scenario, arrivals: Arrivals, profiles: ProfileSet, demand: Demand
) -> dict[str, set[str]]:
    """Per deployment, the card type whose fleet costs least over the whole day: for each hour,
    the cards its busiest 10 minutes need (x BURST_FACTOR, at least the minimum replicas) at
    that type's price, summed. The packer plans the peak; this weighs the troughs too, where
    the autoscaler keeps the minimum fleet for hours (a fast card's single replica all night
    can cost more than a slower card's two at the peaks)."""
    minimum = scenario.fleet.autoscale.min_replicas
    per_hour = round(3600 / PEAK_BIN_S)
    out: dict[str, set[str]] = {}
    for m in demand.models:
        rates = online_rates(arrivals, arrivals.deployments.index(m.deployment))
        padded = np.pad(rates, (0, -len(rates) % per_hour))
        hourly = padded.reshape(-1, per_hour).max(axis=1)  # each hour's busiest bin
        best: tuple[float, str] | None = None
        for type_name in scenario.fleet.types:
            gpu = gpu_types()[type_name]
            profile = profiles.get(m.profile, type_name)
            if not candidate_configs(m, profile, gpu.memory_mb):
                continue  # misses the SLO at the peak
            cost = 0.0
            for rate in hourly:
                at = m.model_copy(update={"rate_rps": max(float(rate), 1e-3)})
                cards = min(
                    math.ceil(max(minimum, c.replicas_needed) * c.share)
                    for c in candidate_configs(at, profile, gpu.memory_mb)
                )
                cost += cards * gpu.price_per_hour
            if best is None or cost < best[0]:
                best = (cost, type_name)
        if best is not None:
            out[m.deployment] = {best[1]}
    return out


def inventory(scenario: Scenario, types: list[str] | None = None) -> Inventory:
    f = scenario.fleet
    nodes = [
        {"name": f"{t}-{n}", "gpus": [{"type": t, "count": f.cards_per_node}]}
        for t in (types or f.types)
        for n in range(f.nodes_per_type)
    ]
    return Inventory.model_validate({"nodes": nodes})


def deployments_from(plan: Plan, scenario: Scenario) -> list[SimDeployment]:
    """The plan's replicas as start-ordered slots: fullest cards first, so a small fleet
    fills a few cards instead of opening many."""
    by_dep: dict[str, list[Slot]] = defaultdict(list)
    for r in sorted(plan.replicas, key=lambda r: r.card):
        card = plan.cards[r.card]
        by_dep[r.config.deployment].append(
            Slot(r.config.deployment, card.id, card.node, card.type, r.config.batch, r.config.share)
        )
    out = []
    for name, spec in scenario.deployments.items():
        if name in by_dep:
            out.append(
                SimDeployment(
                    name, spec.model, spec.slo_ms / 1e3, spec.timeout_s, tuple(by_dep[name])
                )
            )
    return out


def settings_of(scenario: Scenario) -> SimSettings:
    f = scenario.fleet
    return SimSettings(
        replica_start_s=f.replica_start_s,
        busy_window_s=f.busy_window_s,
        routing_stats_period_s=f.routing_stats_period_s,
        interval_s=f.autoscale.interval_s,
        upscale_delay_s=f.autoscale.upscale_delay_s,
        downscale_delay_s=f.autoscale.downscale_delay_s,
        look_back_s=f.autoscale.look_back_s,
        min_replicas=f.autoscale.min_replicas,
        offline_aging_s=f.offline_aging_s,
        offline_rows_while_online=f.offline_rows_while_online,
        offline_short_call_s=f.offline_short_call_ms / 1e3,
        offline_concurrency=f.offline_concurrency,
        jitter_sigma=scenario.call_costs.jitter_sigma,
        lanes=tuple(
            (name, spec.lane.max_in_flight, spec.lane.max_queued)
            for name, spec in scenario.deployments.items()
            if spec.lane is not None
        ),
    )


def stream(arrivals: Arrivals) -> Iterator[tuple]:
    names = arrivals.deployments
    online, offline = TrafficClass.ONLINE, TrafficClass.OFFLINE
    for t, d, on, rows, work, kind in zip(
        arrivals.t_s.tolist(),
        arrivals.deployment.tolist(),
        arrivals.online.tolist(),
        arrivals.rows.tolist(),
        arrivals.work.tolist(),
        arrivals.kind.tolist(),
        strict=True,
    ):
        yield (t, names[d], online if on else offline, rows, work, kind)


def simulate_plan(
    scenario: Scenario, arrivals: Arrivals, plan: Plan, policy: Policy
) -> tuple[SimOutcome, float]:
    sim = FleetSim(
        deployments_from(plan, scenario),
        policy,
        settings_of(scenario),
        call_costs(scenario).call_ms,
        # The router's view of a card: relative speed (only ratios between replicas matter).
        lambda gpu: gpu.speed,
        [SimFailure(f.at_h * 3600, f.down_min * 60) for f in scenario.failures],
        seed=scenario.seed,
    )
    t0 = time.perf_counter()
    outcome = sim.run(stream(arrivals), arrivals.end_s)
    return outcome, time.perf_counter() - t0


def run_day(
    scenario: Scenario,
    mdrp_dir: Path,
    policies: tuple[str, ...] = (
        "ours",
        "serve_default",
        "ffd",
        "best_single_type",
        "serve_default_equal_cost",
    ),
    progress: Callable[[str], None] = print,
    tuned: Tuned | None = None,
) -> dict[str, Any]:
    """Every policy over the day of ``scenario`` (its seed); ``tuned``: the planning days'
    choice when already made (it does not depend on the day's seed), else made here."""
    arrivals, cities, profiles, demand = build_day(scenario, mdrp_dir)
    progress(
        f"day: {len(cities)} cities, {len(arrivals)} requests over {arrivals.end_s / 3600:.1f} h "
        f"({', '.join(f'{k} {int((arrivals.kind == i).sum())}' for i, k in enumerate(KINDS))})"
    )
    base = base_policy(scenario)
    default = Policy(
        "serve_default",
        router="pow2",
        scaler="ongoing",
        classes=False,
        admission=False,
        target_ongoing=scenario.fleet.serve_target_ongoing_requests,
    )
    mixed = plan_milp(inventory(scenario), demand, profiles, objective="cost", time_limit_s=5)
    runs: dict[str, PolicyRun] = {}

    def run(name: str, plan: Plan, policy: Policy, note: str = "") -> PolicyRun:
        outcome, wall = simulate_plan(scenario, arrivals, plan, policy)
        runs[name] = PolicyRun(name, plan, policy, outcome, wall, note)
        s = summary(runs[name])
        progress(
            f"  {name:<26} cost ${s['gpu_cost']:.0f}  {s['gpu_hours']:.1f} GPU-h  online in SLO "
            f"{s['online_attainment']:.4f}  offline done {s['offline_done']:.3f}  ({wall:.0f} s)"
        )
        return runs[name]

    ours_plan, ours, ours_note, single = mixed, base, "", None
    if needs_tuning(policies):
        tuned = tuned or tune(scenario, mdrp_dir, progress)
        if tuned.plan is not None:
            ours_plan, ours, ours_note = tuned.plan, tuned.policy, tuned.note
        single = tuned.single
    if "ours" in policies or "serve_default_equal_cost" in policies:
        run("ours", ours_plan, ours, ours_note)
    if "ours_peak_plan" in policies:
        run("ours_peak_plan", mixed, base, "the packer's peak plan, Busy 0.6 everywhere")
    if "serve_default" in policies:
        run("serve_default", ours_plan, default)
    if "ours_day" in policies:
        types_of = day_types(scenario, arrivals, profiles, demand)
        plan = plan_milp(inventory(scenario), demand, profiles, "cost", 5, types_of)
        run("ours_day", plan, base, "card types by the day's cost: " + _types_note(types_of))
    if "ffd" in policies:
        try:
            run("ffd", plan_ffd(inventory(scenario), demand, profiles), base)
        except PlacementInfeasible as exc:
            # What an operator of num_gpus: 0.5 does when half a card misses the target.
            progress(f"  ffd at half cards: {exc}; whole cards instead")
            plan = plan_ffd(inventory(scenario), demand, profiles, share=1.0)
            run("ffd", plan, base, "whole cards: half cards miss the SLO")
    if "best_single_type" in policies:
        # Every type as the packer plans it for this day at Busy 0.6, and the single type
        # tuned like ours on the planning days: the cheapest of them that meets the SLO here.
        best: PolicyRun | None = None
        for t in scenario.fleet.types:
            try:
                plan = plan_milp(inventory(scenario, [t]), demand, profiles, "cost", 5)
            except PlacementInfeasible as exc:
                progress(f"  single type {t}: infeasible ({exc})")
                continue
            tried = [run(f"single_{t}", plan, base)]
            if single is not None and single[0] == t:
                tried.append(run(single[2].name, single[1], single[2]))
            for got in tried:
                s, b = summary(got), summary(best) if best else None
                # The cheapest that meets the SLO; failing that, the one closest to it.
                if b is None or _better_single(s, b):
                    best = got
        if best is not None:
            runs["best_single_type"] = PolicyRun(
                "best_single_type", best.plan, best.policy, best.outcome, best.wall_s, best.name
            )
    if "serve_default_equal_cost" in policies:
        target_cost = summary(runs["ours"])["gpu_cost"]
        lo, hi = 0.25, 64.0
        found: PolicyRun | None = None
        for _ in range(6):  # bisect target_ongoing_requests in log space
            mid = math.sqrt(lo * hi)
            got = run(f"serve_default@{mid:.2f}", ours_plan, _with(default, mid))
            cost = summary(got)["gpu_cost"]
            if found is None or abs(cost - target_cost) < abs(
                summary(found)["gpu_cost"] - target_cost
            ):
                found = got
            if abs(cost - target_cost) <= 0.03 * target_cost:
                break
            lo, hi = (mid, hi) if cost > target_cost else (lo, mid)
        assert found is not None
        runs["serve_default_equal_cost"] = PolicyRun(
            "serve_default_equal_cost",
            found.plan,
            found.policy,
            found.outcome,
            found.wall_s,
            f"target_ongoing_requests={found.policy.target_ongoing:.2f}",
        )
    costs = call_costs(scenario)
    return {
        "label": "simulated; call costs from the measured profiles (profiles/), other types "
        "derived by the stated rule",
        "seed": scenario.seed,
        "tuned_on_seeds": list(scenario.tuning.seeds),
        "unseen": scenario.seed not in scenario.tuning.seeds,
        "call_costs": costs.sources(
            sorted({d.model for d in scenario.deployments.values()}), scenario.fleet.types
        ),
        "cities": scenario.cities,
        "scenario": scenario.model_dump(),
        "requests": {k: int((arrivals.kind == i).sum()) for i, k in enumerate(KINDS)},
        "hours": math.ceil(arrivals.end_s / 3600),
        "policies": {name: summary(r) for name, r in runs.items()},
    }


#: The policies that run a plan made on the tuning seeds' days.
TUNED_POLICIES = frozenset(
    {"ours", "serve_default", "serve_default_equal_cost", "best_single_type"}
)


def needs_tuning(policies: tuple[str, ...]) -> bool:
    return bool(TUNED_POLICIES & set(policies))


def base_policy(scenario: Scenario) -> Policy:
    return Policy("ours", target_busy=scenario.fleet.autoscale_target_busy)


@dataclass
class Tuned:
    """What the planning days chose, before any day is run: ours's plan, policy and note, and
    the best single type's (type, plan, policy); plan None when no combination was found."""

    plan: Plan | None
    policy: Policy
    note: str
    single: tuple[str, Plan, Policy] | None


def tune(scenario: Scenario, mdrp_dir: Path, progress: Callable[[str], None] = print) -> Tuned:
    """Card types and Busy targets for ours and the single-type baseline, on the tuning seeds'
    days (``fleet.tune``): the same whatever seed the scenario's own day has."""
    base = base_policy(scenario)
    seeds = ", ".join(str(s) for s in scenario.tuning.seeds)
    progress(f"  tuning card types and Busy targets on the days of seeds {seeds}:")
    days, trials = tune_on_planning_days(scenario, mdrp_dir, progress)
    wanted = scenario.tuning.attainment + scenario.tuning.margin
    # The trials price each deployment on cards of its own; the finalists (the mixed
    # choice and each type's) are priced again as the packer shares cards among them.
    mixed_choice = choose(trials, wanted)
    singles = single_type_choices(trials, scenario.fleet.types, wanted)
    finalists = [c for c in [mixed_choice, *singles] if c is not None]
    priced = {c.options: price_jointly(days, c, base, progress) for c in finalists}
    tuned = Tuned(None, base, "", None)
    if finalists:
        best = min(finalists, key=lambda c: priced[c.options].rank(wanted))
        tuned.plan, tuned.policy = priced[best.options].plan, _tuned(base, "ours", best.targets)
        tuned.note = best.note() + priced[best.options].note()
    if singles:
        chosen = min(singles, key=lambda c: priced[c.options].rank(wanted))
        (gpu_type,) = {g for types in chosen.types_of.values() for g in types}
        policy = _tuned(base, f"single_{gpu_type}_tuned", chosen.targets)
        tuned.single = (gpu_type, priced[chosen.options].plan, policy)
    return tuned


@dataclass
class PlanningDay:
    scenario: Scenario
    arrivals: Arrivals
    profiles: ProfileSet
    demand: Demand


@dataclass
class Priced:
    """A finalist's joint plan run on every planning day: gpu_cost the mean ($), attainment
    the worst day's."""

    plan: Plan
    gpu_cost: float
    attainment: float

    def rank(self, wanted: float) -> tuple[bool, float]:
        return preference(self.attainment, self.gpu_cost, wanted)

    def note(self) -> str:
        return f"; jointly ${self.gpu_cost:.0f}, worst day {self.attainment:.4f}"


def price_jointly(
    days: list[PlanningDay], choice: Choice, base: Policy, progress: Callable[[str], None]
) -> Priced:
    """``choice`` planned as the packer shares cards (``largest_plan``) and run, all its
    deployments together, over every planning day."""
    plan = largest_plan(days, choice.types_of)
    policy = _tuned(base, "finalist", choice.targets)
    costs, attained = [], []
    for d in days:
        outcome, wall = simulate_plan(d.scenario, d.arrivals, plan, policy)
        s = summary(PolicyRun("finalist", plan, policy, outcome, wall))
        costs.append(s["gpu_cost"])
        attained.append(s["online_attainment"])
    got = Priced(plan, sum(costs) / len(costs), min(attained))
    types = ", ".join(sorted({t for ts in choice.types_of.values() for t in ts}))
    progress(f"    finalist on {types}: ${got.gpu_cost:.0f}, worst day {got.attainment:.4f}")
    return got


def tune_on_planning_days(
    scenario: Scenario, mdrp_dir: Path, progress: Callable[[str], None] = print
) -> tuple[list[PlanningDay], list[Trial]]:
    """``fleet.tune``'s trials on every planning day, with each day's demand and profiles
    (what a plan made before the day is made from)."""
    days, trials = [], []
    for k, planning in enumerate(planning_scenarios(scenario)):
        arrivals, _, profiles, demand = build_day(planning, mdrp_dir)
        days.append(PlanningDay(planning, arrivals, profiles, demand))

        def simulate(
            a: Arrivals, plan: Plan, policy: Policy, day: Scenario = planning
        ) -> tuple[dict, SimOutcome]:
            outcome, wall = simulate_plan(day, a, plan, policy)
            return summary(PolicyRun(policy.name, plan, policy, outcome, wall)), outcome

        trials += run_trials(
            planning,
            arrivals,
            profiles,
            demand,
            lambda t, day=planning: inventory(day, [t]),
            simulate,
            day=k,
            progress=progress,
        )
    return days, trials


def largest_plan(
    days: list[PlanningDay], types_of: dict[str, set[str]], types: list[str] | None = None
) -> Plan:
    """The packer's plan within ``types_of`` for each planning day's peak, the costliest of
    them: its replicas are the autoscaler's ceiling, so the busiest day sets it. Made, like
    the choice, before the day it runs."""
    plans = [
        plan_milp(inventory(d.scenario, types), d.demand, d.profiles, "cost", 5, types_of)
        for d in days
    ]
    return max(plans, key=lambda p: p.cost_per_hour())


def _tuned(policy: Policy, name: str, targets: tuple[tuple[str, float], ...]) -> Policy:
    return replace(policy, name=name, targets=targets)


def _types_note(types_of: dict[str, set[str]]) -> str:
    return ", ".join(f"{d} {'/'.join(sorted(t))}" for d, t in types_of.items())


def _with(policy: Policy, target_ongoing: float) -> Policy:
    return replace(
        policy, name=f"serve_default@{target_ongoing:.2f}", target_ongoing=target_ongoing
    )


def _better_single(s: dict[str, Any], b: dict[str, Any]) -> bool:
    ok_s, ok_b = s["online_attainment"] >= 0.99, b["online_attainment"] >= 0.99
    if ok_s != ok_b:
        return ok_s
    if ok_s:
        return s["gpu_cost"] < b["gpu_cost"]
    return s["online_attainment"] > b["online_attainment"]


def summary(run: PolicyRun) -> dict[str, Any]:
    """The figures of one run: the day's totals, per request kind, per hour, and the plan."""
    o = run.outcome
    hours = max(1, math.ceil(o.end_s / 3600))
    ok, late, shed = (sum(t.values()) for t in (o.ok, o.late, o.shed))
    by_kind = {}
    for k, kind in enumerate(KINDS[:2]):
        n_ok = sum(v for (_, kk), v in o.ok.items() if kk == k)
        n_late = sum(v for (_, kk), v in o.late.items() if kk == k)
        n_shed = sum(v for (_, kk), v in o.shed.items() if kk == k)
        lat = np.sort(np.asarray(o.latencies.get(k, [0.0])))
        by_kind[kind] = {
            "requests": n_ok + n_late + n_shed,
            "attainment": n_ok / max(1, n_ok + n_late + n_shed),
            "p50_ms": float(lat[len(lat) // 2] * 1e3),
            "p99_ms": float(lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3),
            "shed": n_shed,
        }
    per_hour = []
    for h in range(hours):
        h_ok = sum(v for (hh, _), v in o.ok.items() if hh == h)
        h_all = h_ok + sum(v for (hh, _), v in o.late.items() if hh == h)
        h_all += sum(v for (hh, _), v in o.shed.items() if hh == h)
        per_hour.append(
            {
                "hour": h,
                "gpu_cost": sum(v for (hh, _), v in o.cost.items() if hh == h),
                "gpu_hours": {t: v / 3600 for (hh, t), v in o.card_s.items() if hh == h and v > 0},
                "online_attainment": h_ok / h_all if h_all else 1.0,
                "shed": sum(v for (hh, _), v in o.shed.items() if hh == h),
                "replicas": {d: v / 3600 for (hh, d), v in o.replica_s.items() if hh == h},
            }
        )
    plan = {}
    for dep, cfg in run.plan.configs().items():
        plan[dep] = {
            "gpu_type": cfg.gpu_type,
            "share": cfg.share,
            "batch": cfg.batch,
            "replicas": sum(1 for r in run.plan.replicas if r.config.deployment == dep),
        }
    return {
        "gpu_cost": sum(o.cost.values()),
        "gpu_hours": sum(o.card_s.values()) / 3600,
        "gpu_hours_by_type": _by_type(o.card_s),
        "online_attainment": ok / max(1, ok + late + shed),
        "online_requests": ok + late + shed,
        "shed": shed,
        "late": late,
        "by_kind": by_kind,
        "offline_done": o.offline_rows_done / o.offline_rows if o.offline_rows else 1.0,
        "retried": o.retried,
        "plan": plan,
        "plan_cost_per_hour": run.plan.cost_per_hour(),
        "target_ongoing_requests": run.policy.target_ongoing
        if run.policy.scaler == "ongoing"
        else None,
        "note": run.note,
        "sim_wall_s": run.wall_s,
        "hours": per_hour,
    }


def _by_type(card_s: dict[tuple[int, str], float]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for (_, t), v in card_s.items():
        out[t] += v / 3600
    return dict(out)
