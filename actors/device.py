"""What a replica knows about its device: sticky-error detection, a watchdog, the health probe.

A CUDA error such as an illegal address poisons the context: every later call fails or
returns garbage until the process restarts. The guard catches it three ways, fastest first:

1. after every request's device call (``watch``): the sticky error state (a device
   synchronise that raises), so the very request that hit the fault reports it;
2. a watchdog: a device call still running past its deadline means a wedged kernel, seen by
   the next ``check`` even though the stuck thread never returns;
3. ``check`` (Serve's ``check_health``): a tiny probe computation, compared with the answer
   recorded at start, run with a timeout so a wedged device cannot wedge the health check.

Once tripped the guard stays tripped (a poisoned context does not recover): request methods
raise ``DeviceUnhealthy`` at once, so the ingress fails over without waiting for Serve, and
``check_health`` keeps failing until Serve replaces the replica.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from actors.errors import DeviceUnhealthy
from actors.faults import FaultSwitch


@dataclass
class DeviceGuard:
    """device : "cpu" or "cuda:<n>"; probe : a small computation returning an array.

    probe_timeout_s : a probe still running after this long trips the guard (seconds).
    on_trip : called once, right after the guard trips (replicas use ``exit_soon``).
    """

    device: str
    probe: Callable[[], Any]
    faults: FaultSwitch = field(default_factory=FaultSwitch)
    probe_timeout_s: float = 2.0
    on_trip: Callable[[], None] | None = None
    expected: np.ndarray | None = None
    healthy: bool = True
    reason: str = ""
    tripped_at: float | None = None
    _inflight: dict[int, float] = field(default_factory=dict)
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self) -> None:
        """Record the probe's answer (and warm the device path); call once at start."""
        self.expected = np.asarray(self._host(self.probe()))

    @contextmanager
    def watch(self, deadline_s: float) -> Iterator[None]:
        """Wrap one request's device work.

        Raises DeviceUnhealthy before the work if the guard has tripped, and after it if the
        device is left with a sticky error (the original exception, if any, is chained).
        A call still running ``deadline_s`` seconds after it started trips the next ``check``.
        """
        self.ensure()
        token = next(self._ids)
        with self._lock:
            self._inflight[token] = time.monotonic() + deadline_s
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

    def check(self) -> None:
        """Serve's health check: raise DeviceUnhealthy if tripped, overdue or the probe fails."""
        self.ensure()
        overdue = self._most_overdue_s()
        if overdue > 0:
            self.trip(f"a device call ran {overdue:.1f}s past its deadline (wedged device?)")
        else:
            future = self._start_probe()
            try:
                got = future.result(timeout=self.probe_timeout_s)
            except FutureTimeout:
                self.trip(f"health probe did not finish in {self.probe_timeout_s}s")
            except DeviceUnhealthy:
                pass  # tripped inside
            except Exception as exc:
                self.trip(f"health probe raised {type(exc).__name__}: {exc}")
            else:
                if self.expected is not None and not np.allclose(
                    got, self.expected, equal_nan=True
                ):
                    self.trip("health probe answer changed")
        self.ensure()

    def ensure(self) -> None:
        """Raise DeviceUnhealthy at once if a fault was already detected (no probe run)."""
        if not self.healthy:
            raise DeviceUnhealthy(self.device, self.reason)

    def trip(self, reason: str) -> None:
        with self._lock:
            first = self.healthy
            if first:
                self.healthy, self.reason, self.tripped_at = False, reason, time.time()
        if first and self.on_trip is not None:
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
            raise DeviceUnhealthy(self.device, self.reason) from cause

    def _most_overdue_s(self) -> float:
        now = time.monotonic()
        with self._lock:
            return max((now - d for d in self._inflight.values()), default=0.0)

    @staticmethod
    def _host(a: Any) -> Any:
        get = getattr(a, "get", None)
        return get() if callable(get) else a


#: Exit status of a replica that ended itself after its device failed.
DEVICE_FAULT_EXIT_CODE = 75


def exit_soon(delay_s: float = 0.1, code: int = DEVICE_FAULT_EXIT_CODE) -> None:
    """End this process shortly (after the refusals already raised have been sent back).

    A poisoned CUDA context only clears with a new process. Exiting lets Serve see a dead
    replica at its next health check and replace it at once, instead of after three failed
    checks; requests still in flight here fail with ``RayActorError`` and fail over.
    """
    import os

    threading.Timer(delay_s, os._exit, args=(code,)).start()
