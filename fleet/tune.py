"""Card types and Busy targets per deployment, chosen by simulating planning days.

The packer sizes each deployment for its peak with a queueing model, and the autoscaler then
runs it at one Busy target all day. Neither sees what the day does: a cheap card that meets a
deployment's SLO all day at one replica while the model asks for six at the peak, a fast card
billed all night for a burst at noon, arrivals burstier than Poisson that need a cooler target.
Here the simulator is the planner: every deployment is run alone, for every card type the
packer finds feasible and every Busy target of the scenario's ``tuning``, over its *planning
days* (the days of the tuning seeds: other cities, sizes, time zones and requests than a day
of any other seed), and the cheapest combination whose online SLO attainment, all deployments
together, is at least ``tuning.attainment + tuning.margin`` on every planning day is chosen.
A day of a seed outside ``tuning.seeds`` was never looked at.

Trials are per deployment (its own cards, its own failure), so the sum of their costs is an
upper bound on a joint plan's, which may share cards: the caller prices its finalists again,
all deployments together (``fleet.day.price_jointly``).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from devices.profiles import ProfileSet
from fleet.demand import Arrivals
from fleet.engine import Policy, SimOutcome, same_run_at
from fleet.scenario import Scenario
from placement.inventory import Demand, Inventory
from placement.packer import PlacementInfeasible, Plan, plan_milp


@dataclass(frozen=True)
class Trial:
    """One deployment alone on one card type at one Busy target, over planning day ``day``.
    gpu_cost : $ of the day; requests, missed : online requests, and those late or shed."""

    deployment: str
    gpu_type: str
    target_busy: float
    gpu_cost: float
    requests: int
    missed: int
    day: int = 0

    @property
    def option(self) -> tuple[str, str, float]:
        return (self.deployment, self.gpu_type, self.target_busy)


@dataclass(frozen=True)
class Choice:
    """Per deployment a card type and a Busy target: ``options`` (deployment, type, target).
    attainment : the worst planning day's, all deployments together; gpu_cost : the mean of
    the planning days' ($); met : the attainment reached what was asked."""

    options: tuple[tuple[str, str, float], ...]
    attainment: float
    gpu_cost: float
    met: bool

    @property
    def types_of(self) -> dict[str, set[str]]:
        return {d: {t} for d, t, _ in self.options}

    @property
    def targets(self) -> tuple[tuple[str, float], ...]:
        return tuple((d, b) for d, _, b in self.options)

    def note(self) -> str:
        parts = ", ".join(f"{d} {t} at Busy {b:g}" for d, t, b in self.options)
        return (
            f"tuned on planning days: {parts}; planned ${self.gpu_cost:.0f}, worst day "
            f"{self.attainment:.4f}"
        )


def planning_scenarios(scenario: Scenario) -> list[Scenario]:
    """The days the tuning sees: the scenario under each of ``tuning.seeds`` (its cities'
    sizes, time zones and requests drawn from that seed). The same for every day evaluated,
    so one tuning serves them all."""
    return [scenario.model_copy(update={"seed": seed}) for seed in scenario.tuning.seeds]


def run_trials(
    planning: Scenario,
    arrivals: Arrivals,
    profiles: ProfileSet,
    demand: Demand,
    inventory_of: Callable[[str], Inventory],
    simulate: Callable[[Arrivals, Plan, Policy], tuple[dict[str, Any], SimOutcome]],
    day: int = 0,
    progress: Callable[[str], None] = print,
) -> list[Trial]:
    """Every deployment x feasible card type x target, simulated alone on planning day ``day``.

    planning, arrivals, profiles, demand : that day's (``fleet.day.build_day``);
    inventory_of : a card type -> the fleet of that type alone;
    simulate : (arrivals, plan, policy) -> the run's summary (``fleet.day.summary``) and
    outcome. A target under which the last run's autoscaler would have decided every tick
    alike (``same_run_at``) is that same run, taken without simulating it again.
    """
    out = []
    for m in demand.models:
        mine = arrivals.of(arrivals.deployments.index(m.deployment))
        for gpu_type in planning.fleet.types:
            try:
                plan = plan_milp(inventory_of(gpu_type), Demand(models=[m]), profiles, "cost", 5)
            except PlacementInfeasible:
                continue
            last: tuple[dict[str, Any], SimOutcome] | None = None
            for target in planning.tuning.targets:
                if last is None or not same_run_at(last[1], m.deployment, target):
                    last = simulate(mine, plan, Policy(f"tune {m.deployment}", target_busy=target))
                    again = ""
                else:
                    again = ", the same run"
                s = last[0]
                trial = Trial(
                    m.deployment,
                    gpu_type,
                    target,
                    s["gpu_cost"],
                    s["online_requests"],
                    s["late"] + s["shed"],
                    day,
                )
                out.append(trial)
                progress(
                    f"    day {day} {m.deployment:<15} {gpu_type:<10} Busy {target:<4g} "
                    f"${trial.gpu_cost:6.0f}  missed {trial.missed}/{trial.requests}  "
                    f"({s['sim_wall_s']:.0f} s{again})"
                )
    return out


def preference(attainment: float, gpu_cost: float, wanted: float) -> tuple[bool, float]:
    """Sort key of a candidate plan: those reaching ``wanted`` first, the cheapest first;
    failing that, the highest attainment first."""
    met = attainment >= wanted
    return (not met, gpu_cost if met else -attainment)


def choose(
    trials: Iterable[Trial], attainment: float, types: set[str] | None = None
) -> Choice | None:
    """The cheapest combination (one option per deployment, card types within ``types``, tried
    on every planning day) whose attainment reaches ``attainment`` on every day; failing that,
    the one with the best worst day. None when a deployment has no such option."""
    runs: dict[tuple[str, str, float], dict[int, Trial]] = defaultdict(dict)
    for t in trials:
        runs[t.option][t.day] = t
    days = {d for r in runs.values() for d in r}
    by_dep: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
    for option, got in runs.items():
        if set(got) == days and (types is None or option[1] in types):
            by_dep[option[0]].append(option)
    if not by_dep or set(by_dep) != {o[0] for o in runs}:
        return None
    best: tuple[tuple[bool, float], Choice] | None = None
    for combo in itertools.product(*by_dep.values()):
        worst, cost = 1.0, 0.0
        for d in days:
            day = [runs[o][d] for o in combo]
            n = sum(t.requests for t in day)
            worst = min(worst, 1.0 - sum(t.missed for t in day) / n if n else 1.0)
            cost += sum(t.gpu_cost for t in day) / len(days)
        key = preference(worst, cost, attainment)
        if best is None or key < best[0]:
            best = (key, Choice(tuple(combo), worst, cost, not key[0]))
    assert best is not None
    return best[1]


def single_type_choices(
    trials: list[Trial], types: Iterable[str], attainment: float
) -> list[Choice]:
    """Per card type, its best choice with every deployment on that type (Mélange's baseline
    tuned the same way as ours); types some deployment cannot run on are left out."""
    return [c for t in types if (c := choose(trials, attainment, {t})) is not None]
