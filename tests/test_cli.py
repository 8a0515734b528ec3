"""The ``orml`` command: runs a round, prints JSON, reports bad input with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

from cli.main import main


def test_round_prints_a_plan(capsys):
    assert main(["round", "--riders", "20", "--orders", "6", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "assigned" in out and "backend            numpy" in out


def test_round_json_is_a_whole_plan(capsys):
    assert main(["round", "--riders", "10", "--orders", "4", "--json", "--backend", "numpy"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["assignments"]) + len(plan["unassigned"]) == 4
    assert set(plan["cost"]) == {"travel_s", "lateness_s", "total"}


def test_bad_counts_exit_2_with_a_message(capsys):
    assert main(["round", "--riders", "-1", "--orders", "2"]) == 2
    assert "n_riders" in capsys.readouterr().err


def test_example_dispatch_prints_a_valid_request(capsys):
    from serve_app.schemas import DispatchRequest

    assert main(["example", "dispatch", "--riders", "5", "--orders", "3", "--seed", "2"]) == 0
    req = DispatchRequest.model_validate_json(capsys.readouterr().out)
    assert len(req.riders) == 5 and len(req.orders) == 3
    assert req.to_domain().orders[0].id == "order-0"


def test_example_etr_prints_a_valid_request(capsys):
    from serve_app.schemas import EtrRequest

    assert main(["example", "etr", "--orders", "3"]) == 0
    assert len(EtrRequest.model_validate_json(capsys.readouterr().out).orders) == 3


def test_example_solve_turns_a_li_lim_file_into_the_same_instance(capsys):
    from pathlib import Path

    import numpy as np

    from planner.pdptw.instance import load_instance
    from serve_app.schemas import SolveRequest

    path = Path(__file__).resolve().parents[1] / "data/pdptw/instances/lr101.txt"
    assert main(["example", "solve", "--from", str(path), "--time-limit", "2"]) == 0
    req = SolveRequest.model_validate_json(capsys.readouterr().out)
    got, want = req.to_call().instance, load_instance(path)
    assert req.time_limit_s == 2 and (got.vehicles, got.capacity) == (want.vehicles, want.capacity)
    for field in ("xy", "demand", "earliest", "latest", "service", "pairs"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))


def test_example_solve_names_a_bad_file(capsys, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("25 200 1\n0 40 50 0 0 1236\n")
    assert main(["example", "solve", "--from", str(bad)]) == 2
    assert f"{bad}:2" in capsys.readouterr().err


def test_round_reports_warm_up_apart_from_the_round(capsys):
    assert main(["round", "--riders", "20", "--orders", "6"]) == 0
    out = capsys.readouterr().out
    assert "warm-up (ms)" in out and "total_ms" in out


MDRP_DAY = Path(__file__).resolve().parents[1] / "data" / "mdrp" / "0r50t75s2p125"


def test_replay_writes_the_library_files_and_a_summary(tmp_path, capsys):
    out = tmp_path / "solution"
    assert main(["replay", str(MDRP_DAY), "--out", str(out), "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["instance"] == "0r50t75s2p125"
    assert summary["feasible"] and summary["violations"] == []
    assert summary["delivered_pct"] >= 99.0
    for name in ("assignments", "orders", "couriers"):
        assert (out / f"solution_info_{name}.txt").read_text().count("\n") > 1
    assert json.loads((out / "summary.json").read_text()) == summary


def test_replay_of_a_bad_folder_or_round_exits_2_with_a_message(tmp_path, capsys):
    assert main(["replay", str(tmp_path)]) == 2
    assert "instance_parameters.txt: cannot read" in capsys.readouterr().err
    assert main(["replay", str(MDRP_DAY), "--round-s", "90"]) == 2
    assert "whole number of minutes" in capsys.readouterr().err
    assert main(["replay", str(MDRP_DAY), "--rollout-min", "-1"]) == 2
    assert "rollout_min must be >= 0" in capsys.readouterr().err
