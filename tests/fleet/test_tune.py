"""Card types and Busy targets chosen on a planning day: the choice by hand, the planning day
apart from the day evaluated, per-deployment targets reaching the autoscaler, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from devices.catalog import gpu_types
from domain import TrafficClass
from fleet.engine import FleetSim, Policy, SimDeployment, SimSettings, Slot, same_run_at
from fleet.tune import Trial, choose, planning_scenarios, single_type_choices

ROOT = Path(__file__).resolve().parents[2]
A10 = gpu_types()["A10"]


def trial(dep: str, gpu: str, target: float, cost: float, missed: int, n: int = 1000) -> Trial:
    return Trial(dep, gpu, target, cost, n, missed)


TRIALS = [
    trial("etr", "A100", 0.6, 100, 30),
    trial("etr", "A100", 0.35, 130, 5),
    trial("etr", "H100", 0.6, 200, 1),
    trial("rounds", "A10", 0.6, 20, 8),
    trial("rounds", "H100", 0.6, 150, 2),
]


def test_choose_takes_the_cheapest_combination_reaching_the_attainment_by_hand() -> None:
    # 2000 requests, at most 20 missed for 0.99: A100 at 0.6 (30) is out whatever the rounds
    # do; A100 at 0.35 with A10 (5 + 8 = 13 missed, $150) beats every other that meets it.
    c = choose(TRIALS, 0.99)
    assert c is not None and c.met
    assert c.types_of == {"etr": {"A100"}, "rounds": {"A10"}}
    assert c.targets == (("etr", 0.35), ("rounds", 0.6))
    assert c.gpu_cost == 150 and c.attainment == pytest.approx(1 - 13 / 2000)


def test_choose_falls_back_to_the_highest_attainment_and_needs_every_deployment() -> None:
    c = choose(TRIALS, 0.9999)
    assert c is not None and not c.met
    assert c.types_of == {"etr": {"H100"}, "rounds": {"H100"}}  # 3 missed, the fewest
    assert choose(TRIALS, 0.99, {"A100"}) is None  # the rounds have no A100 trial


def test_choose_wants_the_attainment_on_every_planning_day_and_averages_the_cost() -> None:
    # On a second day the A10 rounds miss 40: A100 at 0.35 with A10 (45 missed) fails there,
    # so the rounds go to the H100 (7 missed on day 1), at the mean of the days' costs.
    second = [
        Trial(t.deployment, t.gpu_type, t.target_busy, t.gpu_cost + 10, t.requests, t.missed, 1)
        for t in TRIALS
    ]
    second[3] = Trial("rounds", "A10", 0.6, 30, 1000, 40, 1)
    c = choose(TRIALS + second, 0.99)
    assert c is not None and c.met
    assert c.options == (("etr", "A100", 0.35), ("rounds", "H100", 0.6))
    assert c.gpu_cost == pytest.approx((130 + 150 + 140 + 160) / 2)
    assert c.attainment == pytest.approx(1 - 7 / 2000)  # the worse day
    # An option tried on one day only is not a choice.
    assert choose(TRIALS + second[:3], 0.99) is None


def test_single_type_choices_keep_every_deployment_on_one_type() -> None:
    # The A10 has no ETR trial and the A100 no rounds trial: only the H100 carries both.
    (single,) = single_type_choices(TRIALS, ["A10", "A100", "H100"], 0.99)
    assert single.met
    assert single.types_of == {"etr": {"H100"}, "rounds": {"H100"}} and single.gpu_cost == 350


def test_the_planning_days_are_the_tuning_seeds_days_never_the_day_run() -> None:
    from fleet.day import build_day
    from fleet.scenario import load_scenario

    day = load_scenario().model_copy(update={"cities": 3})
    assert day.seed not in day.tuning.seeds  # the scenario's own day is one it never saw
    planning, second = planning_scenarios(day)
    assert (planning.seed, second.seed) == tuple(day.tuning.seeds) == (0, 1)
    # The same planning days whatever day is run: one tuning serves every seed.
    assert planning_scenarios(day.model_copy(update={"seed": 7})) == [planning, second]
    mdrp = ROOT / "data" / "mdrp"
    a, cities, _, _ = build_day(day, mdrp)
    b, p_cities, _, _ = build_day(planning, mdrp)
    # Other cities (sizes, time zones) and requests than the day run.
    assert [(c.size, c.shift_h) for c in cities] != [(c.size, c.shift_h) for c in p_cities]
    assert len(a) != len(b)
    etr = a.of(0)
    assert len(etr) == int((a.deployment == 0).sum()) and (etr.deployment == 0).all()
    assert np.all(np.diff(etr.t_s) >= 0)


def two_deployments_at_busy_half() -> tuple[list, list, SimSettings]:
    """Two deployments, each a 50 ms call every 100 ms (Busy 0.5 on one replica), two slots."""
    deps = [
        SimDeployment(
            name, "m", 1.0, 10.0, tuple(Slot(name, k + 2 * i, "n", A10, 1, 1.0) for k in range(2))
        )
        for i, name in enumerate("ab")
    ]
    arrivals = [
        (0.1 * k + 0.01 * i, name, TrafficClass.ONLINE, 1, 1.0, 0)
        for k in range(1200)
        for i, name in enumerate("ab")
    ]
    settings = SimSettings(
        replica_start_s=0.0,
        jitter_sigma=0.0,
        interval_s=1.0,
        upscale_delay_s=0.0,
        look_back_s=5.0,
        busy_window_s=5.0,
    )
    return deps, arrivals, settings


def test_a_per_deployment_target_reaches_that_deployment_s_autoscaler_only() -> None:
    # At the default target 0.6 both keep one replica; at 0.35 for "b" alone, "b" grows.
    deps, arrivals, settings = two_deployments_at_busy_half()
    policy = Policy("ours", targets=(("b", 0.35),))
    assert policy.target_of("a") == 0.6 and policy.target_of("b") == 0.35
    sim = FleetSim(deps, policy, settings, lambda m, g, w: 50.0, lambda g: 1.0)
    out = sim.run(iter(arrivals), end_s=120.0)
    most = {d: max(counts[d] for _, counts in out.replicas_timeline) for d in "ab"}
    assert most == {"a": 1, "b": 2}


def test_a_target_the_autoscaler_would_have_decided_alike_under_is_the_same_run() -> None:
    # Busy 0.5 all along at target 0.6: at 0.55 every tick wants what it wanted (one replica),
    # at 0.45 the first tick wants two. The tuner skips the first rerun, never the second.
    deps, arrivals, settings = two_deployments_at_busy_half()

    def run(target: float):
        sim = FleetSim(
            deps, Policy("t", target_busy=target), settings, lambda m, g, w: 50.0, lambda g: 1.0
        )
        return sim.run(iter(arrivals), end_s=120.0)

    first = run(0.6)
    assert same_run_at(first, "a", 0.55) and same_run_at(first, "b", 0.55)
    assert not same_run_at(first, "a", 0.45)
    assert not same_run_at(first, "c", 0.6)  # a deployment the run never scaled
    again, lower = run(0.55), run(0.45)
    assert (again.latencies, again.cost, again.replicas_timeline) == (
        first.latencies,
        first.cost,
        first.replicas_timeline,
    )
    assert lower.replicas_timeline != first.replicas_timeline


def test_orml_simulate_tunes_ours_and_the_single_type_baseline_and_reports_every_policy(
    tmp_path: Path,
) -> None:
    from cli.main import main

    out = tmp_path / "sim.json"
    args = ["simulate", "--cities", "2", "--mdrp", str(ROOT / "data" / "mdrp"), "--json"]
    args += [str(out), "--out", str(tmp_path)]
    args += ["--policies", "ours,serve_default,ffd,best_single_type"]
    args += ["--set", "tuning.targets=[0.6, 0.35]", "--set", "tuning.seeds=[0]"]
    args += ["--set", "city_size.scale=2"]  # small cities: the tuning, not the load, is checked
    args += ["--set", "fleet.routing_stats_period_s=5"]  # nor Busy pushed every second
    args += ["--set", "fleet.types=[A10, H100, CPU-16core]"]  # measured, derived, a CPU node
    args += ["--seed", "2", "3"]  # two days the tuning (seed 0) never saw, tuned once
    assert main(args) == 0
    days = json.loads(out.read_text())["days"]
    assert [d["seed"] for d in days] == [2, 3] and all(d["unseen"] for d in days)
    # Which call costs were measured (the H100, 16 host cores) and which derived (the A10).
    sources = {(c["model"], c["type"]): c["source"] for c in days[0]["call_costs"]}
    assert sources[("or_solver", "A10")] == "derived"
    assert sources[("or_solver", "H100")].startswith("measured")
    assert sources[("or_solver", "CPU-16core")].startswith("measured")
    pols = days[0]["policies"]
    assert set(pols) >= {"ours", "serve_default", "ffd", "best_single_type"}
    assert pols["ours"]["note"].startswith("tuned on planning days")
    tuned = [n for n in pols if n.startswith("single_") and n.endswith("_tuned")]
    assert len(tuned) == 1  # the tuned single type, beside every type planned at Busy 0.6
    assert pols["best_single_type"]["note"] in {n for n in pols if n.startswith("single_")}
    for p in pols.values():
        assert p["gpu_cost"] > 0 and p["gpu_hours"] > 0
        assert 0.0 <= p["online_attainment"] <= 1.0
    assert (tmp_path / "simulate.png").stat().st_size > 10_000
    report = (tmp_path / "simulate.md").read_text()
    assert "SIMULATED" in report and "| seed | ours $" in report  # the per-seed table
