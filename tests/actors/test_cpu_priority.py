"""``actors.cpu_priority``: a process's threads raised or lowered against the host's others.

Each case runs in a child process of its own (a priority, once raised or lowered, stays with
the process), started at nice 10 as Ray starts its workers at a niceness of their own."""

from __future__ import annotations

import multiprocessing as mp
import os
import threading

import pytest

from actors.cpu_priority import lower_priority, raise_priority

linux = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="per-thread nice: Linux")


def _raise_in_child(steps: int, out) -> None:
    os.nice(10 - os.nice(0))
    started = threading.Event()
    stop = threading.Event()

    def idle() -> None:
        started.set()
        stop.wait()

    before = threading.Thread(target=idle)  # a thread that exists before the raise
    before.start()
    started.wait()
    applied = raise_priority(steps)
    after_nice: list[int] = []
    later = threading.Thread(target=lambda: after_nice.append(os.getpriority(os.PRIO_PROCESS, 0)))
    later.start()
    later.join()
    out.send((applied, sorted(_thread_nices()), after_nice[0]))
    stop.set()
    before.join()


def _thread_nices() -> set[int]:
    """The nice values of this process's threads now (one that ends meanwhile is left out)."""
    nices = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            nices.add(os.getpriority(os.PRIO_PROCESS, int(tid)))
        except ProcessLookupError:
            continue
    return nices


def _in_child(target, *args):
    """``target(*args, pipe)`` in a spawned child: what it sent (fails at once if it died)."""
    if os.nice(0) > 10:  # the children go to nice 10, which takes raising a priority from here
        pytest.skip("this process runs below nice 10")
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=target, args=(*args, child))
    proc.start()
    try:
        assert parent.poll(60), f"the child sent nothing (exit code {proc.exitcode})"
        return parent.recv()
    finally:
        proc.join(10)


def _run(steps: int):
    return _in_child(_raise_in_child, steps)


def _may_raise() -> bool:
    """Whether this host lets a process lower its nice value (root, CAP_SYS_NICE)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_try_raise)


def _try_raise() -> bool:
    os.nice(10 - os.nice(0))
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 9)
    except PermissionError:
        return False
    return True


@linux
def test_every_thread_is_raised_and_threads_started_later_inherit_it() -> None:
    applied, nices, later = _run(3)
    if not _may_raise():
        assert applied.startswith("unchanged") and nices == [10] and later == 10
        pytest.skip("this host does not let a process raise its priority (CAP_SYS_NICE)")
    assert applied == "nice 7"
    assert nices == [7]  # the main thread and the one started before the raise
    assert later == 7


@linux
def test_zero_steps_change_nothing() -> None:
    applied, nices, later = _run(0)
    assert applied == "unchanged" and nices == [10] and later == 10


def test_negative_steps_are_refused() -> None:
    with pytest.raises(ValueError, match="steps"):
        raise_priority(-1)


def _lower_in_child(out) -> None:
    out.send((lower_priority("nice"), os.nice(0)))


def test_lower_priority_nice_goes_to_19() -> None:
    assert _in_child(_lower_in_child) == ("nice 19", 19)


def _raise_unprivileged(out) -> None:
    os.nice(10 - os.nice(0))
    os.setuid(65534)  # nobody: no CAP_SYS_NICE
    out.send((raise_priority(3), os.getpriority(os.PRIO_PROCESS, 0)))


@linux
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop")
def test_without_the_capability_nothing_changes() -> None:
    applied, nice = _in_child(_raise_unprivileged)
    assert applied.startswith("unchanged") and nice == 10
