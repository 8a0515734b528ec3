"""A legal request never trips the watchdog: a round's watchdog allows what its caller waits
for (plus ``watchdog_s``), and past that the round has stopped itself at a checkpoint.

The solver replica is built in-process (no Ray) with a 0.2 s watchdog and the array loops a
warming replica prices with; a round of about a second runs while Serve's held health check
(``check_and_hold``) watches it, as in a replica. Before, a round's watchdog was ``watchdog_s``
whatever the round: this one tripped the guard, and with ``exit_on_device_fault`` the replica
ended itself; the same request, retried, would end the next.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from actors.errors import Abandoned
from actors.or_solver import OrSolverDeployment
from kernels import compiled
from planner import generate_round
from planner.dispatch_round import round_arrays


@pytest.fixture
def solver(request):
    watchdog_s = getattr(request, "param", 0.2)
    replica = OrSolverDeployment.func_or_class(
        "numpy", {"watchdog_s": watchdog_s, "exit_on_device_fault": False, "health_hold_s": 0.05}
    )
    compiled.defer()  # price on the array loops: the slowest path a legal round takes
    return replica  # tests/conftest.py resumes the compiled builds after the test


def run_watched(replica, round_, timeout_s):
    _, arrays = round_arrays(round_)

    async def go():
        work = asyncio.ensure_future(
            replica.solve_round(arrays, round_.weights, None, True, "online", timeout_s)
        )
        checks = 0
        while not work.done():
            await replica.guard.check_and_hold(0.05)  # Serve's health check, held
            checks += 1
        return await work, checks

    t0 = time.perf_counter()
    got, checks = asyncio.run(go())
    return got, checks, time.perf_counter() - t0


def test_a_round_longer_than_watchdog_s_within_its_deadline_keeps_the_replica_healthy(solver):
    round_ = generate_round(1500, 500, seed=2)
    got, checks, took = run_watched(solver, round_, timeout_s=30.0)
    print(f"round of {took:.2f} s, {checks} held checks, guard healthy: {solver.guard.healthy}")
    assert took > 0.2 and checks > 1  # longer than watchdog_s, watched all along
    assert solver.guard.healthy
    assert len(got.rider_of) == len(round_.orders)


@pytest.mark.parametrize("solver", [4.0], indirect=True)
def test_a_round_past_its_deadline_stops_itself_before_the_watchdog(solver):
    """Its deadline passes mid-pricing: it stops at the next block (~1 M pairs: under 1 s on
    the array loops of an idle 2-core box, 1.4 s beside three busy loops), before deadline +
    watchdog_s (4 s here, leaving a loaded machine room; deploy.yaml's is 10 s)."""
    round_ = generate_round(3000, 1500, seed=3)
    t0 = time.perf_counter()
    with pytest.raises(Abandoned):
        run_watched(solver, round_, timeout_s=0.3)
    print(f"stopped {time.perf_counter() - t0:.2f} s after it started")
    assert solver.guard.healthy


def test_a_static_solve_whose_child_died_keeps_the_replica_healthy():
    """A static solve in a child process is no device call: when the child is killed, its
    replacement takes longer to start than ``time_limit_s + watchdog_s``, and the replica
    stays healthy (before, the watchdog fired, the replica ended itself and the request was
    answered 422 as a poison after the second replica died the same way)."""
    import os
    import signal

    from ops.hostile import solve_body
    from serve_app.schemas import SolveRequest

    replica = OrSolverDeployment.func_or_class(
        "numpy",
        {"watchdog_s": 0.1, "exit_on_device_fault": False, "health_hold_s": 0.05},
        offline={"priority": "nice", "processes": 1},
    )
    try:
        instance = SolveRequest(**solve_body(20, time_limit_s=0.1)).to_call().instance
        for pid in replica.offline.pids:
            os.kill(pid, signal.SIGKILL)

        async def go():
            work = asyncio.ensure_future(replica.solve_pdptw(instance, 0.1, 0, 30.0))
            while not work.done():
                await replica.guard.check_and_hold(0.05)  # Serve's health check, held
            return await work

        got = asyncio.run(go())
        assert got["routes"] and replica.offline.restarts == 1
        assert replica.guard.healthy
    finally:
        replica.offline.close()
