"""A replica stops computing work nobody waits for: a static solve or a round whose caller's
deadline passes, or whose call is cancelled, ends at its next checkpoint instead of running
to its time limit (it kept the replica busy for up to two minutes before)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from actors.abandon import Abandon
from actors.errors import Abandoned
from planner import generate_round
from planner.dispatch_round import round_arrays, solve_round
from planner.pdptw.instance import load_instance
from planner.pdptw.solve import solve

INSTANCE = Path(__file__).resolve().parents[2] / "data/pdptw/instances/lc101.txt"


def test_a_solve_stops_at_its_callers_deadline_not_its_time_limit():
    abandon = Abandon(timeout_s=0.3)
    t0 = time.perf_counter()
    with pytest.raises(Abandoned, match="deadline"):
        solve(load_instance(INSTANCE), time_limit_s=20, seed=0, checkpoint=abandon.checkpoint)
    assert time.perf_counter() - t0 < 2.0


def test_a_round_stops_between_its_steps_once_cancelled():
    _, arrays = round_arrays(generate_round(2000, 600, seed=4))
    abandon = Abandon(timeout_s=None)
    abandon.cancel()
    with pytest.raises(Abandoned, match="cancelled"):
        solve_round(arrays, generate_round(1, 1).weights, checkpoint=abandon.checkpoint)


@pytest.mark.serve
def test_the_solver_replica_stops_a_solve_its_caller_abandoned(serve_endpoints):
    from ray import serve

    handle = serve.get_deployment_handle("OrSolver", "orml")
    instance = load_instance(INSTANCE)
    # Past its deadline: ends with Abandoned after ~the deadline, not the 20 s limit.
    t0 = time.perf_counter()
    with pytest.raises(Abandoned):
        handle.solve_pdptw.remote(instance, 20.0, 0, 0.5).result(timeout_s=60)
    assert time.perf_counter() - t0 < 5.0
    # Cancelled: the replica's call ends (it counts as completed) within a checkpoint or two.
    before = handle.stats.remote().result(timeout_s=30)["calls"]
    response = handle.solve_pdptw.remote(instance, 20.0, 1)
    time.sleep(1.0)
    response.cancel()
    deadline = time.monotonic() + 8.0
    while handle.stats.remote().result(timeout_s=30)["calls"] <= before:
        assert time.monotonic() < deadline, "the cancelled solve kept computing"
        time.sleep(0.2)
