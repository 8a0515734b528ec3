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
    tids = [int(t) for t in os.listdir("/proc/self/task")]
    out.send((applied, sorted({os.getpriority(os.PRIO_PROCESS, t) for t in tids}), after_nice[0]))
    stop.set()
    before.join()


def _run(steps: int):
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_raise_in_child, args=(steps, child))
    proc.start()
    got = parent.recv()
    proc.join(10)
    return got


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
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_lower_in_child, args=(child,))
    proc.start()
    assert parent.recv() == ("nice 19", 19)
    proc.join(10)


def _raise_unprivileged(out) -> None:
    os.nice(10 - os.nice(0))
    os.setuid(65534)  # nobody: no CAP_SYS_NICE
    out.send((raise_priority(3), os.getpriority(os.PRIO_PROCESS, 0)))


@linux
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to drop")
def test_without_the_capability_nothing_changes() -> None:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_raise_unprivileged, args=(child,))
    proc.start()
    applied, nice = parent.recv()
    proc.join(10)
    assert applied.startswith("unchanged") and nice == 10
