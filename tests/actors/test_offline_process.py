"""``actors.offline_process``: static solves in a low-priority child process."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from actors.abandon import Abandon
from actors.errors import Abandoned
from actors.offline_process import OfflineSolves
from planner.pdptw.evaluate import evaluate
from planner.pdptw.instance import load_instance

INSTANCE = load_instance(Path(__file__).resolve().parents[2] / "data/pdptw/instances/lc101.txt")


@pytest.fixture(scope="module")
def idle():
    solves = OfflineSolves("idle")
    yield solves
    solves.close()


def test_the_child_runs_at_the_lowest_cpu_priority_and_solves(idle):
    # 2 s: at SCHED_IDLE the child gets only what the box leaves over (a busy CI box: little)
    sol = idle.solve(INSTANCE, 2.0, 3, Abandon(None), yield_to=None)
    [pid] = idle.pids
    assert pid != os.getpid()
    assert os.sched_getscheduler(pid) == os.SCHED_IDLE
    ev = evaluate(INSTANCE, sol.routes)
    assert ev.feasible and not sol.unassigned


def test_a_nice_child_runs_at_nice_19():
    solves = OfflineSolves("nice")
    try:
        solves.solve(INSTANCE, 0.05, 0, Abandon(None), yield_to=None)
        assert os.getpriority(os.PRIO_PROCESS, solves.pids[0]) == 19
    finally:
        solves.close()


def test_the_child_stops_at_the_callers_deadline_and_on_cancel(idle):
    t0 = time.perf_counter()
    with pytest.raises(Abandoned, match="deadline"):
        idle.solve(INSTANCE, 20.0, 0, Abandon(0.3), yield_to=None)
    assert time.perf_counter() - t0 < 3.0
    abandon = Abandon(None)
    threading.Timer(0.3, abandon.cancel).start()
    t0 = time.perf_counter()
    with pytest.raises(Abandoned, match="cancelled"):
        idle.solve(INSTANCE, 20.0, 1, abandon, yield_to=None)
    assert time.perf_counter() - t0 < 3.0
    # and it takes the next solve as usual
    assert idle.solve(INSTANCE, 0.05, 2, Abandon(None), yield_to=None).routes


def test_the_child_steps_aside_while_online_calls_run(idle):
    before = idle.yields
    with idle.online():
        # The solve cannot finish while the online call is held: release it after 0.3 s.
        held = threading.Event()
        t = threading.Timer(0.3, held.set)
        t.start()
        done: list = []
        worker = threading.Thread(
            target=lambda: done.append(idle.solve(INSTANCE, 0.3, 4, Abandon(None), None))
        )
        worker.start()
        held.wait()
    worker.join(30)
    assert done and idle.yields > before and idle.yielded_s > 0


def test_the_thread_policy_solves_in_the_callers_process():
    solves = OfflineSolves("thread")
    assert solves.pids == []
    sol = solves.solve(INSTANCE, 0.05, 0, Abandon(None), yield_to=lambda: 0.0)
    assert sol.routes


def test_two_processes_solve_two_at_once():
    solves = OfflineSolves("idle", processes=2)

    def two_at_once(limit_s: float) -> tuple[list, float]:
        got: list = []
        threads = [
            threading.Thread(
                target=lambda k=k: got.append(
                    solves.solve(INSTANCE, limit_s, k, Abandon(None), None)
                )
            )
            for k in range(2)
        ]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        return got, time.perf_counter() - t0

    try:
        two_at_once(0.05)  # both children up, their compiled kernels loaded, as a replica's are
        got, took = two_at_once(0.5)
        # one at a time would take 1 s and more; two processes, each its own 0.5 s limit
        assert len(got) == 2 and took < 0.95
        assert len(set(solves.pids)) == 2
    finally:
        solves.close()


def test_a_closed_pool_leaves_no_process():
    solves = OfflineSolves("idle", processes=2)
    pids = solves.pids
    solves.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_an_unknown_policy_or_no_process_is_refused():
    with pytest.raises(ValueError, match="offline priority"):
        OfflineSolves("realtime")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="processes"):
        OfflineSolves("idle", processes=0)


def test_a_killed_child_is_replaced_and_its_next_solve_answers():
    """SIGKILL of the idle child: the next solve goes to a fresh child, never to the dead
    one; the pool counts the restart and stays healthy."""
    import signal

    solves = OfflineSolves("nice")
    try:
        [dead] = solves.pids
        os.kill(dead, signal.SIGKILL)
        time.sleep(0.2)
        sol = solves.solve(INSTANCE, 0.2, 0, Abandon(None), yield_to=None)
        assert sol.routes
        assert solves.pids != [dead] and solves.restarts == 1
        solves.check()
    finally:
        solves.close()


def test_a_child_killed_mid_solve_has_its_solve_finished_by_a_fresh_one():
    import signal

    solves = OfflineSolves("nice")
    try:
        solves.solve(INSTANCE, 0.05, 0, Abandon(None), yield_to=None)  # warm
        [dead] = solves.pids
        threading.Timer(0.3, os.kill, (dead, signal.SIGKILL)).start()
        sol = solves.solve(INSTANCE, 1.0, 1, Abandon(None), yield_to=None)
        assert sol.routes and solves.restarts == 1 and dead not in solves.pids
    finally:
        solves.close()


def test_a_second_death_answers_a_retryable_error():
    """Both the child and its replacement die under the same solve: WorkerLost (a 503)."""
    import signal

    from actors.errors import WorkerLost
    from serve_app.error_answers import answer_for, retry_after_s

    solves = OfflineSolves("nice")
    try:
        solves.solve(INSTANCE, 0.05, 0, Abandon(None), yield_to=None)  # warm

        def kill_each_child():
            seen: set[int] = set()
            deadline = time.monotonic() + 20
            while len(seen) < 2 and time.monotonic() < deadline:
                for pid in solves.pids:
                    if pid not in seen:
                        time.sleep(0.5)  # let it take the solve
                        seen.add(pid)
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.05)

        killer = threading.Thread(target=kill_each_child)
        killer.start()
        with pytest.raises(WorkerLost) as err:
            solves.solve(INSTANCE, 5.0, 1, Abandon(None), yield_to=None)
        killer.join()
        assert answer_for(err.value).http_status == 503 and retry_after_s(err.value) == 1.0
    finally:
        solves.close()
