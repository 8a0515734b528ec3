"""The ``orml`` command: runs a round, prints JSON, reports bad input with exit code 2."""

from __future__ import annotations

import json

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
