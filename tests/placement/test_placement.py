"""Placement: inputs validated at the edge, plans that never over-commit a card and meet their
targets in the simulator, a Serve config that Serve accepts, and a replica that keeps its
memory budget."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from devices.catalog import gpu_types
from devices.profiles import ProfileSet, load_profile
from fleet.placement_sim import simulate_placement
from placement.emit import emit_config
from placement.inventory import PlacementInputError, load_demand, load_inventory
from placement.packer import PLANNERS, PlacementInfeasible
from placement.synthetic import demand_mix, mixed_inventory, model_zoo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "placement"


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("nodes: [{name: a, gpus: [{type: T4, count: 0}]}]", "nodes[0].gpus[0].count"),
        ("nodes: [{name: a, gpus: [{type: V900, count: 1}]}]", "unknown GPU type 'V900'"),
        ("nodes: [{name: a, gpus: [{type: T4, count: 1, colour: red}]}]", "colour"),
        ("nodes: []", "nodes"),
        ("nodes: [{name: a, gpus: [", "not valid YAML"),
    ],
)
def test_bad_inventory_names_file_and_field(tmp_path, text, field):
    path = tmp_path / "inv.yaml"
    path.write_text(text)
    with pytest.raises(PlacementInputError, match=r"inv\.yaml") as info:
        load_inventory(path)
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("model", "field"),
    [
        ({"deployment": "Etr", "profile": "etr", "p99_ms": 10}, "models[0].rate_rps"),
        ({"deployment": "Etr", "profile": "etr", "rate_rps": -1, "p99_ms": 10}, "rate_rps"),
        (
            {
                "deployment": "Etr",
                "profile": "etr",
                "rate_rps": 1,
                "p99_ms": 10,
                "burst_factor": 0.5,
            },
            "burst_factor",
        ),
    ],
)
def test_bad_demand_names_the_field(tmp_path, model, field):
    path = tmp_path / "demand.yaml"
    path.write_text(yaml.safe_dump({"models": [model]}))
    with pytest.raises(PlacementInputError, match=field.replace("[", r"\[").replace("]", r"\]")):
        load_demand(path)


def test_profiles_measured_and_estimated_are_told_apart():
    profiles = ProfileSet.load(ROOT / "profiles")
    cpu = profiles.get("etr", "CPU-2core")
    assert not cpu.estimate and cpu.measured
    # The cards measured on lent devices are measured; the others scale from the fastest.
    for model in ("etr", "or_solver"):
        for card in ("H100", "H200"):
            got = profiles.get(model, card)
            assert not got.estimate and got.measured and got.command, (model, card)
    h200, t4 = profiles.get("etr", "H200"), profiles.get("etr", "T4")
    assert t4.estimate and "scaled from H200" in t4.basis
    assert t4.context_mb == 300  # the T4's CUDA context, not the H200's
    ratio = gpu_types()["H200"].speed / gpu_types()["T4"].speed
    assert t4.latency_ms(64) == pytest.approx(h200.latency_ms(64) * ratio)
    assert load_profile(ROOT / "profiles/or_solver/cpu-numpy.json").points[0].batch == 1
    # A CPU node beside the cards: the round by size on a card's 16-core host
    host = profiles.get("or_solver", "CPU-16core")
    assert not host.estimate and [r.round for r in host.round_sizes][-1] == "5000x2000"
    assert all(r.p99_ms is None for r in host.round_sizes)  # medians only: none made up


@settings(max_examples=8, deadline=None, derandomize=True, database=None)
@given(
    seed=st.integers(0, 10_000),
    n_models=st.integers(2, 8),
    scale=st.sampled_from([0.2, 0.5, 1.0]),
    counts=st.fixed_dictionaries(
        {"T4": st.integers(0, 6), "A10": st.integers(1, 6), "A100-80GB": st.integers(0, 3)}
    ),
    method=st.sampled_from(["milp", "heuristic"]),
)
def test_plans_never_over_commit_and_meet_their_targets(seed, n_models, scale, counts, method):
    zoo = model_zoo(n_models, seed)
    demand = demand_mix(zoo, seed, scale)
    inventory = mixed_inventory({k: v for k, v in counts.items() if v})
    try:
        plan = PLANNERS[method](inventory, demand, zoo)
    except PlacementInfeasible:
        return  # too few cards for this demand: refusing is right
    plan.check()
    for card_id, reps in plan.by_card().items():
        card = plan.cards[card_id]
        assert sum(r.config.share for r in reps) <= 1 + 1e-9
        assert sum(r.config.memory_mb for r in reps) <= card.type.memory_mb
        assert all(r.config.gpu_type == card.type.name for r in reps)
    result = simulate_placement(plan, demand, zoo, duration_s=8.0, seed=seed)
    for outcome in result.deployments.values():
        # Plans sit right at their p99: allow the simulation's sampling error (3 standard
        # errors of a 99% proportion over this many requests), not more.
        slack = 3 * math.sqrt(0.01 * 0.99 / max(outcome.requests, 1))
        assert outcome.attainment >= 0.99 - slack, result.deployments


def test_milp_uses_fewer_cards_than_first_fit_decreasing():
    zoo = model_zoo(8, 3)
    demand = demand_mix(zoo, 3, 0.5)
    inventory = mixed_inventory({"T4": 8, "A10": 8, "A100-80GB": 4, "H100": 2})
    ours = PLANNERS["milp"](inventory, demand, zoo)
    ffd = PLANNERS["ffd"](inventory, demand, zoo)
    assert ours.optimal and ours.cards_used() < ffd.cards_used()


def test_emitted_config_is_a_valid_serve_config_the_app_accepts():
    from ray.serve.schema import ServeDeploySchema

    from actors.etr_batcher import EtrUserConfig
    from serve_app.config import DispatchAppArgs

    profiles = ProfileSet.load(ROOT / "profiles")
    inventory = load_inventory(EXAMPLES / "inventory.yaml")
    demand = load_demand(EXAMPLES / "demand.yaml")
    plan = PLANNERS["milp"](inventory, demand, profiles)
    base = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    config = emit_config(plan, base)
    app = ServeDeploySchema.model_validate(config).applications[0]
    DispatchAppArgs(**app.args)
    by_name = {d["name"]: d for d in config["applications"][0]["deployments"]}
    for name, cfg in plan.configs().items():
        d = by_name[name]
        assert d["num_replicas"] == sum(r.config.deployment == name for r in plan.replicas)
        assert d["ray_actor_options"]["num_gpus"] == cfg.share
        assert d["ray_actor_options"]["accelerator_type"] in {"T4", "L4", "A10", "A100", "H100"}
        assert "autoscaling_config" not in d
    EtrUserConfig(**by_name["Etr"]["user_config"])


def test_orml_plan_writes_the_config_and_refuses_bad_files(tmp_path):
    out = tmp_path / "planned.yaml"
    args = ["--inventory", str(EXAMPLES / "inventory.yaml"), "--demand"]
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "plan",
            *args,
            str(EXAMPLES / "demand.yaml"),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert yaml.safe_load(out.read_text())["applications"][0]["name"] == "orml"
    bad = tmp_path / "demand.yaml"
    bad.write_text("models: [{deployment: Etr, profile: etr, rate_rps: 10}]")
    err = subprocess.run(
        [sys.executable, "-m", "cli.main", "plan", *args, str(bad), "-o", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert err.returncode == 2 and "p99_ms" in err.stderr and err.stderr.count("\n") == 1


def test_an_etr_replica_refuses_a_batch_over_its_memory_budget():
    from actors.etr_model import EtrDeployment

    replica = EtrDeployment.func_or_class("onnxruntime")
    asyncio.run(replica.reconfigure({"max_batch_size": 64, "memory_budget_mb": 4096}))
    with pytest.raises(ValueError, match="memory_budget_mb 10"):
        asyncio.run(replica.reconfigure({"max_batch_size": 4096, "memory_budget_mb": 10}))
    assert replica.config.max_batch_size == 64  # the refused config did not apply


@pytest.mark.serve
def test_an_emitted_plan_lands_on_the_planned_gpu_types(tmp_path):
    """ray.cluster_utils.Cluster: a T4 node and an A10 node; each replica's node, read through
    Ray's state API, has the accelerator type the plan chose for it."""
    import json

    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("cluster_placement.py")), str(out)],
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert len(result["replicas"]) == result["expected_replicas"] > 0, result
    assert all(r["landed"] == r["planned"] for r in result["replicas"]), result
    assert {r["planned"] for r in result["replicas"]} == {"T4", "A10"}, result


def test_a_measured_round_profile_loads_with_its_sizes(tmp_path, monkeypatch):
    """What ``python -m placement.profiler or_solver --sizes ...`` writes is a profile the
    planner reads: one batch point, and the round's cost by size beside it (on a host of the
    catalog's CPU type: a CPU is named by its cores)."""
    import json

    from devices.profiles import load_profile
    from placement import profiler
    from placement.profiler import profile_or_solver

    monkeypatch.setattr(profiler.os, "cpu_count", lambda: 2)

    prof = profile_or_solver("numpy", 30, 10, 2, [(40, 15)])
    path = tmp_path / "cpu-numpy.json"
    path.write_text(json.dumps(prof))
    loaded = load_profile(path)
    assert [p.round for p in loaded.round_sizes] == ["30x10", "40x15"]
    assert loaded.points[0].batch == 1 and loaded.command.endswith("--sizes 40x15")


def test_the_measured_profiles_are_what_their_device_runs_say():
    """profiles/'s H100, H200 and CPU-16core files come from the runs kept under docs/gpu/ by
    placement.profile_import, figure for figure (rerunning it changes nothing)."""
    import json

    from placement.profile_import import import_measurements

    h100 = ROOT / "docs/gpu/h100-2026-11-27"
    h200 = ROOT / "docs/gpu/h200-2026-11-27"
    made = import_measurements(
        "H100",
        16,
        h100 / "etr-h100-cuda-cupy.json",
        h100 / "or_solver-h100-cupy.json",
        [h100 / "rounds-run3.json", h100 / "big_round-run3.json"],
        "docs/gpu/h100-2026-11-27",
        "",
    ) | import_measurements(
        "H200",
        16,
        ROOT / "docs/gpu/h200-2026-11-26/profile-etr-h200-cupy.json",
        h200 / "profile-or_solver-h200-cupy.json",
        [h200 / "rounds-run2.json", h200 / "rounds_5000x2000-run2.json"],
        "docs/gpu/h200-2026-11-27",
        "",
        cpu=False,
    )
    assert sorted(made) == [
        "etr/h100-cupy.json",
        "etr/h200-cupy.json",
        "or_solver/cpu16-numpy.json",
        "or_solver/h100-cupy.json",
        "or_solver/h200-cupy.json",
    ]
    for name, profile in made.items():
        kept = json.loads((ROOT / "profiles" / name).read_text())
        assert {**kept, "command": ""} == {**profile, "command": ""}, name


def test_a_cpu_node_is_a_target_where_it_is_cheaper_at_the_slo():
    """The round measured on a card's 16-core host runs a 300 x 100 round in 7.8 ms against
    the H100's 15.3 ms, at a tenth of the price: priced by cost, the example's demand goes to
    the CPU nodes, and the emitted config asks cores there, no card."""
    from placement.inventory import Inventory

    profiles = ProfileSet.load(ROOT / "profiles")
    demand = load_demand(EXAMPLES / "demand.yaml")
    nodes = [
        {"name": "cpu", "gpus": [{"type": "CPU-16core", "count": 2}]},
        {"name": "gpu", "gpus": [{"type": "H100", "count": 2}]},
    ]
    plan = PLANNERS["milp"](Inventory.model_validate({"nodes": nodes}), demand, profiles, "cost")
    plan.check()
    assert {r.config.gpu_type for r in plan.replicas} == {"CPU-16core"}
    # the same demand on the cards alone costs a card
    cards = Inventory.model_validate({"nodes": nodes[1:]})
    on_cards = PLANNERS["milp"](cards, demand, profiles, "cost")
    assert {r.config.gpu_type for r in on_cards.replicas} == {"H100"}
    base = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    config = emit_config(plan, base)
    for d in config["applications"][0]["deployments"]:
        if d["name"] in ("Etr", "OrSolver"):
            options = d["ray_actor_options"]
            assert "num_gpus" not in options and "accelerator_type" not in options
            assert options["num_cpus"] == 16 * next(
                r.config.share for r in plan.replicas if r.config.deployment == d["name"]
            )
