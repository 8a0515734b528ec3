"""The device guard and the fault switch, without Ray: each fault is caught by the path meant
to catch it, and a tripped guard refuses work at once."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from actors.device import DeviceGuard
from actors.errors import DeviceUnhealthy
from actors.faults import CRASH_EXIT_CODE, FaultInjectionDisabled, FaultSwitch


def check(guard: DeviceGuard) -> None:
    """One unheld health check, as a test would call it outside an event loop."""
    asyncio.run(guard.check_and_hold(0.0))


def make_guard(**kw) -> DeviceGuard:
    guard = DeviceGuard("cpu", lambda: np.arange(4.0), faults=FaultSwitch(enabled=True), **kw)
    guard.arm()
    return guard


def test_a_healthy_guard_runs_work_and_passes_checks():
    guard = make_guard()
    with guard.watch(1.0):
        pass
    check(guard)
    assert guard.healthy


def test_poison_fails_the_request_that_hit_it_and_everything_after():
    guard = make_guard()
    guard.faults.inject("poison")
    with pytest.raises(DeviceUnhealthy, match="cudaErrorIllegalAddress"), guard.watch(1.0):
        pass  # the work "ran"; the sticky error shows after it
    assert not guard.healthy and guard.tripped_at is not None
    t0 = time.perf_counter()
    with pytest.raises(DeviceUnhealthy), guard.watch(1.0):
        pytest.fail("a tripped guard must refuse before the work")
    assert time.perf_counter() - t0 < 0.01
    with pytest.raises(DeviceUnhealthy):
        check(guard)


def test_poison_without_traffic_is_caught_by_the_probe():
    guard = make_guard()
    guard.faults.inject("poison")
    with pytest.raises(DeviceUnhealthy, match="cudaErrorIllegalAddress"):
        check(guard)


def test_an_error_inside_the_work_is_chained_when_the_device_is_poisoned():
    guard = make_guard()
    guard.faults.inject("poison")
    with pytest.raises(DeviceUnhealthy) as info, guard.watch(1.0):
        raise RuntimeError("kernel launch failed")
    assert isinstance(info.value.__cause__, RuntimeError)


def test_an_ordinary_error_leaves_a_healthy_device_healthy():
    guard = make_guard()
    with pytest.raises(ValueError), guard.watch(1.0):
        raise ValueError("bad rows")
    assert guard.healthy


def test_a_wedged_call_is_caught_by_the_watchdog_while_it_still_hangs():
    guard = make_guard(probe_timeout_s=0.3)
    guard.faults.inject("hang")

    def request() -> None:
        with guard.watch(0.2):
            pass

    threading.Thread(target=request, daemon=True).start()
    time.sleep(0.3)
    t0 = time.perf_counter()
    with pytest.raises(DeviceUnhealthy, match="past its deadline"):
        check(guard)
    assert time.perf_counter() - t0 < 0.1  # the check itself never waits on the device


def test_a_wedged_device_without_traffic_fails_the_probe_within_its_timeout():
    guard = make_guard(probe_timeout_s=0.3)
    guard.faults.inject("hang")
    t0 = time.perf_counter()
    with pytest.raises(DeviceUnhealthy, match="did not finish"):
        check(guard)
    assert time.perf_counter() - t0 < 1.0


def test_a_changed_probe_answer_trips():
    answers = iter([np.arange(4.0), np.arange(4.0) + 1])
    guard = DeviceGuard("cpu", lambda: next(answers))
    guard.arm()
    with pytest.raises(DeviceUnhealthy, match="answer changed"):
        check(guard)


def test_injection_is_refused_unless_enabled():
    with pytest.raises(FaultInjectionDisabled):
        FaultSwitch().inject("poison")
    with pytest.raises(ValueError):
        FaultSwitch(enabled=True).inject("meteor")


@pytest.mark.parametrize(
    ("after", "expect_before_s"),
    [("s.on_device_call(); time.sleep(0.1); s.on_device_call()", 1.0), ("time.sleep(10)", 2.0)],
    ids=["at-next-device-call", "fallback-timer"],
)
def test_crash_exits_the_process_after_acknowledging(after, expect_before_s):
    code = (
        "import time; from actors.faults import FaultSwitch\n"
        "s = FaultSwitch(enabled=True)\n"
        "print(s.inject('crash') > 0, flush=True)\n"
        f"{after}\n"
        "print('survived', flush=True)\n"
    )
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert proc.returncode == CRASH_EXIT_CODE and proc.stdout.strip() == "True"
    assert time.monotonic() - t0 < expect_before_s + 5.0  # (interpreter start-up is slack)


def health_check(guard: DeviceGuard, hold_s: float) -> tuple[float, BaseException | None]:
    """One ``guard.check_and_hold(hold_s)`` on a fresh event loop: (seconds, what it raised)."""
    t0 = time.perf_counter()
    try:
        asyncio.run(guard.check_and_hold(hold_s))
    except Exception as exc:
        return time.perf_counter() - t0, exc
    return time.perf_counter() - t0, None


def test_the_initial_health_check_is_neither_held_nor_delayed():
    took, raised = health_check(make_guard(), 5.0)
    assert raised is None and took < 0.5
    guard = make_guard(trip_grace_s=5.0)
    guard.faults.inject("poison")
    took, raised = health_check(guard, 5.0)
    assert isinstance(raised, DeviceUnhealthy) and took < 0.5


def test_a_held_check_on_a_healthy_device_returns_after_the_hold():
    guard = make_guard()
    health_check(guard, 0.0)
    took, raised = health_check(guard, 0.3)
    assert raised is None and 0.25 < took < 2.0


def test_a_held_check_ends_the_moment_another_thread_trips_the_guard():
    guard = make_guard()
    health_check(guard, 0.0)
    threading.Timer(0.2, guard.trip, args=("poisoned by a request",)).start()
    took, raised = health_check(guard, 10.0)
    assert isinstance(raised, DeviceUnhealthy) and "poisoned by a request" in str(raised)
    assert took < 2.0  # not the 10 s hold


@pytest.mark.parametrize("found_by", ["a request", "the probe"])
def test_a_failed_check_waits_its_grace_for_the_exit_then_fails(found_by):
    guard = make_guard(trip_grace_s=0.3)
    health_check(guard, 0.0)
    if found_by == "a request":
        guard.trip("poisoned")
    else:
        guard.faults.inject("poison")
    took, raised = health_check(guard, 10.0)
    assert isinstance(raised, DeviceUnhealthy) and 0.25 < took < 2.0


def wedge_a_request_after(guard: DeviceGuard, delay_s: float, deadline_s: float) -> None:
    """In ``delay_s``, wedge the device and start a request with ``deadline_s`` on a thread."""

    def request() -> None:
        guard.faults.inject("hang")
        with guard.watch(deadline_s):
            pass

    timer = threading.Timer(delay_s, request)
    timer.daemon = True  # the request never returns
    timer.start()


def test_a_held_check_trips_at_a_wedged_calls_deadline_not_at_the_next_check():
    guard = make_guard()
    health_check(guard, 0.0)
    wedge_a_request_after(guard, 0.2, deadline_s=0.3)
    took, raised = health_check(guard, 10.0)
    assert isinstance(raised, DeviceUnhealthy) and "past its deadline" in str(raised)
    assert took < 2.0


def test_a_hung_probe_gives_way_to_an_earlier_watchdog_deadline():
    guard = make_guard(probe_timeout_s=5.0)
    health_check(guard, 0.0)
    wedge_a_request_after(guard, 0.0, deadline_s=0.3)
    time.sleep(0.1)  # the request is in flight, not yet overdue; the probe will hang too
    took, raised = health_check(guard, 10.0)
    assert isinstance(raised, DeviceUnhealthy) and "past its deadline" in str(raised)
    assert took < 2.0  # not the 5 s probe timeout


def test_a_hung_probe_does_not_block_the_replicas_event_loop():
    guard = make_guard(probe_timeout_s=0.5)
    guard.faults.inject("hang")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    async def run() -> None:
        task = asyncio.ensure_future(ticker())
        # The probe is a device call too: its own deadline or the timeout, whichever comes first
        with pytest.raises(DeviceUnhealthy, match=r"past its deadline|did not finish"):
            await guard.check_and_hold(0.0)
        task.cancel()

    asyncio.run(run())
    assert ticks >= 20  # the loop kept running through the 0.5 s the probe hung
