"""What a replica knows about its device: sticky-error detection, a watchdog, the health probe.

A CUDA error such as an illegal address poisons the context: every later call fails or
returns garbage until the process restarts. The guard catches it three ways, fastest first:

1. after every request's device call (``watch``): the sticky error state (a device
   synchronise that raises), so the very request that hit the fault reports it;
2. a watchdog: a device call still running past its deadline means a wedged kernel, seen by
   the health check even though the stuck thread never returns;
3. ``check_and_hold`` (Serve's ``check_health``): a tiny probe computation, compared with
   the answer recorded at start, run with a timeout so a wedged device cannot wedge the check.

``check_and_hold`` turns Serve's polled health check into a long poll: after its probe a
check waits while the device stays healthy and ends the moment the guard trips. One check is
always waiting at the replica, so when a tripped replica ends its process that check fails as
an actor crash, which Serve acts on at its next control-loop tick (0.1 s), instead of the
next check starting up to ``health_check_period_s`` later.

Once tripped the guard stays tripped (a poisoned context does not recover): request methods
raise ``DeviceUnhealthy`` at once, so the ingress fails over without waiting for Serve, and
``check_health`` keeps failing until Serve replaces the replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from actors.errors import DeviceUnhealthy
from actors.faults import FaultSwitch
from actors.process import exit_soon


@dataclass
class DeviceGuard:
    """device : "cpu" or "cuda:<n>"; probe : a small computation returning an array.

    probe_timeout_s : a probe still running after this long trips the guard (seconds).
    on_trip : called once, right after the guard trips (replicas use ``exit_soon``).
    trip_grace_s : after a trip, how long a held check waits for ``on_trip`` to end the process
    before it fails the check itself (seconds; 0 when the process stays up).
    """

    device: str
    probe: Callable[[], Any]
    faults: FaultSwitch = field(default_factory=FaultSwitch)
    probe_timeout_s: float = 1.0
    on_trip: Callable[[], None] | None = None
    trip_grace_s: float = 0.0
    expected: np.ndarray | None = None
    healthy: bool = True
    reason: str = ""
    tripped_at: float | None = None
    _inflight: dict[int, float] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _checks: int = 0  # check_and_hold calls so far
    # The event loop a held check waits on, its wake-up, and when it wakes by itself;
    # trip() and watch() run on any thread and wake it.
    _waiting: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
    _wake_at: float = float("inf")

    def arm(self) -> None:
        """Record the probe's answer (and warm the device path); call once at start."""
        self.expected = np.asarray(self._host(self.probe()))

    @contextmanager
    def watch(self, deadline_s: float) -> Iterator[None]:
        """Wrap one request's device work.

        Raises DeviceUnhealthy before the work if the guard has tripped, and after it if the
        device is left with a sticky error (the original exception, if any, is chained).
        A call still running ``deadline_s`` seconds after it started trips the guard: at once
        if a held check is waiting (``check_and_hold``), else at the next check.
        """
        self.ensure()
        token = next(self._ids)
        deadline = time.monotonic() + deadline_s
        with self._lock:
            self._inflight[token] = deadline
        if deadline < self._wake_at:
            self._wake_waiter()  # it sleeps past this deadline: let it sleep less
        try:
            self.faults.on_device_call()
            try:
                yield
            except Exception as exc:
                self._raise_if_sticky(exc)
                raise
            self._raise_if_sticky(None)
        finally:
            with self._lock:
                self._inflight.pop(token, None)

    async def check_and_hold(self, seconds: float) -> None:
        """Serve's health check as a long poll: raise if tripped, a call is overdue or the
        probe fails (awaited, never blocking the event loop), then wait up to ``seconds``
        while the device stays healthy. Both waits end early when the guard trips or an
        in-flight call passes its deadline (the watchdog acts then, not at the next check).
        Raises DeviceUnhealthy, after ``trip_grace_s``: in that time the process normally
        ends and Serve sees the replica crash (replaced at once) instead of one failed check
        of three. The first call is Serve's initial check, which gates the replica's start:
        it is neither held nor delayed. Call from one event loop; keep ``seconds +
        trip_grace_s`` under Serve's health_check_timeout_s.
        """
        first = self._checks == 0
        self._checks += 1
        try:
            self.ensure()
            if not self._trip_if_overdue():
                probe = asyncio.wrap_future(self._start_probe())
                # A probe left behind by a trip still ends; its error is known, not "unretrieved".
                probe.add_done_callback(lambda f: f.cancelled() or f.exception())
                if await self._wait(probe, self.probe_timeout_s):
                    self._judge_probe(probe)
                else:
                    self.trip(f"health probe did not finish in {self.probe_timeout_s}s")
            if not first:
                await self._wait(None, seconds)
            self.ensure()
        except DeviceUnhealthy:
            if not first and self.trip_grace_s > 0:
                await asyncio.sleep(self.trip_grace_s)
            raise

    async def _wait(self, work: asyncio.Future[Any] | None, timeout_s: float) -> bool:
        """Wait for ``work`` (None: nothing) for up to ``timeout_s``; True if it finished.
        Raises DeviceUnhealthy as soon as the guard trips, an overdue call tripping it too."""
        loop = asyncio.get_running_loop()
        if self._waiting is None or self._waiting[0] is not loop:
            self._waiting = (loop, asyncio.Event())
        wake = self._waiting[1]
        end = time.monotonic() + timeout_s
        try:
            while True:
                wake.clear()  # before looking: a wake-up from here on is not missed
                if work is not None and work.done():
                    return True
                now = time.monotonic()
                if now >= end:  # first: a probe past its timeout says so, not "overdue call"
                    return False
                self._trip_if_overdue()
                self.ensure()
                self._wake_at = min(end, self._next_deadline())
                waiter = asyncio.ensure_future(wake.wait())
                await asyncio.wait(
                    [waiter] if work is None else [waiter, work],
                    timeout=self._wake_at - now + 1e-3,
                    return_when=asyncio.FIRST_COMPLETED,
                )
                waiter.cancel()
        finally:
            self._wake_at = float("inf")

    def _wake_waiter(self) -> None:
        if self._waiting is not None:
            loop, event = self._waiting
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(event.set)

    def _trip_if_overdue(self) -> bool:
        overdue = self._most_overdue_s()
        if overdue > 0:
            self.trip(f"a device call ran {overdue:.1f}s past its deadline (wedged device?)")
        return overdue > 0

    def _judge_probe(self, probe: asyncio.Future[np.ndarray]) -> None:
        exc = probe.exception()
        if isinstance(exc, DeviceUnhealthy):
            return  # tripped inside
        if exc is not None:
            self.trip(f"health probe raised {type(exc).__name__}: {exc}")
        elif self.expected is not None and not np.allclose(
            probe.result(), self.expected, equal_nan=True
        ):
            self.trip("health probe answer changed")

    def ensure(self) -> None:
        """Raise DeviceUnhealthy at once if a fault was already detected (no probe run)."""
        if not self.healthy:
            raise DeviceUnhealthy(self.device, self.reason)

    def trip(self, reason: str) -> None:
        with self._lock:
            first = self.healthy
            if first:
                self.healthy, self.reason, self.tripped_at = False, reason, time.time()
        if not first:
            return
        self._wake_waiter()
        if self.on_trip is not None:
            self.on_trip()

    def sticky_error(self) -> str | None:
        """The device's sticky error, or None; on CUDA a synchronise that raises is one."""
        injected = self.faults.sticky_error()
        if injected is not None:
            return injected
        if self.device.startswith("cuda"):
            import cupy

            try:
                cupy.cuda.runtime.deviceSynchronize()
            except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError) as e:
                return f"{type(e).__name__}: {e}"
        return None

    def _start_probe(self) -> Future[np.ndarray]:
        # A daemon thread per probe, not a pool: a probe stuck on a wedged device must not
        # keep the process from exiting when Serve stops it.
        future: Future[np.ndarray] = Future()

        def run() -> None:
            try:
                with self.watch(self.probe_timeout_s):
                    got = np.asarray(self._host(self.probe()))
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(got)

        threading.Thread(target=run, name="device-probe", daemon=True).start()
        return future

    def _raise_if_sticky(self, cause: BaseException | None) -> None:
        err = self.sticky_error()
        if err is not None:
            self.trip(err)
            raise DeviceUnhealthy(self.device, self.reason, during_call=True) from cause

    def _next_deadline(self) -> float:
        with self._lock:
            return min(self._inflight.values(), default=float("inf"))

    def _most_overdue_s(self) -> float:
        now = time.monotonic()
        with self._lock:
            return max((now - d for d in self._inflight.values()), default=0.0)

    @staticmethod
    def _host(a: Any) -> Any:
        get = getattr(a, "get", None)
        return get() if callable(get) else a


#: A held health check waits this long after a trip for ``exit_soon`` to end the process.
EXIT_GRACE_S = 0.5


class GuardSettings(BaseModel):
    """How a model replica watches its device (``args.resilience.replicas`` in deploy.yaml;
    README "Operations" explains each trade-off). Defined once, here, for every deployment."""

    model_config = ConfigDict(extra="forbid")
    watchdog_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="A device call running this long marks its replica unhealthy (wedged), "
        "seconds; an offline solve gets its time limit on top.",
    )
    probe_timeout_s: float = Field(
        1.0,
        gt=0,
        le=60,
        description="The health probe (milliseconds of work) must finish within this, seconds; "
        "keep it under health_check_timeout_s so a hung probe trips the replica first.",
    )
    health_hold_s: float = Field(
        0.5,
        ge=0,
        le=10,
        description="After its probe a health check waits this long while the device stays "
        "healthy and ends the moment it fails, so Serve sees a failed replica's crash within "
        "a control-loop tick instead of at the next health_check_period_s. 0: answer at once "
        "(Serve's plain polling). Keep it + EXIT_GRACE_S under health_check_timeout_s.",
    )
    exit_on_device_fault: bool = Field(
        True,
        description="A replica whose device failed ends its process, so Serve replaces it at "
        "once instead of after three failed health checks.",
    )
    fault_injection: bool = Field(
        False,
        description="Drills only: enable POST /admin/faults and the replicas' inject_fault.",
    )
    busy_window_s: float = Field(
        3.0,
        gt=0,
        le=600,
        description="The window a replica's Busy is measured over, seconds (Serve's autoscaler "
        "averages the reports again over its look_back_period_s).",
    )
    stuck_after_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Busy the whole time with no device call finishing for this long: the "
        "replica raises the orml_replica_stuck alarm and fails its health check.",
    )


def replica_guard(device: str, probe: Callable[[], Any], settings: GuardSettings) -> DeviceGuard:
    """The guard of a model replica, armed: on a device fault it ends the process
    (``exit_soon``) when ``settings.exit_on_device_fault``; ``settings.fault_injection`` enables
    the drills' switch. Raises whatever the probe raises (a replica that cannot run it must not
    start)."""
    guard = DeviceGuard(
        device,
        probe,
        faults=FaultSwitch(enabled=settings.fault_injection),
        probe_timeout_s=settings.probe_timeout_s,
        on_trip=exit_soon if settings.exit_on_device_fault else None,
        trip_grace_s=EXIT_GRACE_S if settings.exit_on_device_fault else 0.0,
    )
    guard.arm()
    return guard
