"""``orml simulate`` end to end on two cities: the JSON every consumer reads, and the PNG."""

from __future__ import annotations

import json
from pathlib import Path

from cli.main import main

ROOT = Path(__file__).resolve().parents[2]


def test_orml_simulate_writes_every_policy_s_cost_and_attainment(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    code = main(
        [
            "simulate",
            "--cities",
            "2",
            "--mdrp",
            str(ROOT / "data" / "mdrp"),
            "--policies",
            "ours,serve_default,ffd,best_single_type",
            # The tuning's search is tested in test_tune.py; here one target on one day.
            "--set",
            "tuning.targets=[0.6]",
            "--set",
            "tuning.planning_days=1",
            # Small cities: what is checked is that every policy is run and reported.
            "--set",
            "city_size.scale=2",
            "--json",
            str(out),
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert set(result["policies"]) >= {"ours", "serve_default", "ffd", "best_single_type"}
    for figures in result["policies"].values():
        assert figures["gpu_cost"] > 0 and figures["gpu_hours"] > 0
        assert 0.0 <= figures["online_attainment"] <= 1.0
    assert (tmp_path / "simulate.png").stat().st_size > 10_000
    assert "SIMULATED" in (tmp_path / "simulate.md").read_text()
