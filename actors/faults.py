"""Fault injection for tests and recovery drills: make a replica act poisoned, hung or dead.

Off unless the application is deployed with ``resilience.replicas.fault_injection: true``; then the
ingress exposes ``POST /admin/faults`` and each model replica accepts ``inject_fault``. A
replica built without the switch refuses with ``FaultInjectionDisabled``.

The faults enter through the same seams a real failure would use, so the code under test is
the production path:

- ``poison``: ``sticky_error`` reports a sticky CUDA error from now on (what
  ``cudaDeviceSynchronize`` returns after an illegal address in a kernel), so request calls and
  the health probe fail exactly as on a poisoned context.
- ``hang``: every later device call blocks forever, like a wedged kernel; the guard's watchdog
  must notice.
- ``crash``: the process exits in its next device call, like a segfault in a driver (or after
  ``CRASH_FALLBACK_S`` if no call comes). Exiting in the acknowledging call itself would race the
  reply: on a loaded host the process could die before the caller hears back; so would a call
  that starts in the same instant on another thread, hence ``CRASH_ARM_S``.
"""

from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field

from actors.process import exit_soon


class FaultKind(enum.StrEnum):
    POISON = "poison"
    HANG = "hang"
    CRASH = "crash"


class FaultInjectionDisabled(PermissionError):
    """The replica was deployed without ``resilience.replicas.fault_injection``."""


#: The sticky error a poisoned context reports; the text mirrors CUDA's own.
INJECTED_CUDA_ERROR = "cudaErrorIllegalAddress: an illegal memory access was encountered (injected)"

#: Exit status of an injected crash (EX_SOFTWARE), recognisable in Ray's logs.
CRASH_EXIT_CODE = 70

#: An armed crash fires at the next device call, or this many seconds after it was injected.
CRASH_FALLBACK_S = 2.0
#: ... but not at a call that starts sooner than this after the injection (the ack goes first).
CRASH_ARM_S = 0.05


@dataclass
class FaultSwitch:
    """One replica's injected faults; thread-safe (requests run in Serve's thread pool)."""

    enabled: bool = False
    poisoned: bool = False
    _hung: threading.Event = field(default_factory=threading.Event)
    _crash_at: float = float("inf")  # monotonic time from which a device call crashes
    _never: threading.Event = field(default_factory=threading.Event)

    def inject(self, kind: FaultKind | str) -> float:
        """Apply a fault; returns the wall-clock time (s since epoch) it took effect.

        Raises FaultInjectionDisabled when the switch is off, ValueError for an unknown kind.
        """
        if not self.enabled:
            raise FaultInjectionDisabled("fault injection is disabled on this replica")
        kind = FaultKind(kind)
        now = time.time()
        if kind is FaultKind.POISON:
            self.poisoned = True
        elif kind is FaultKind.HANG:
            self._hung.set()
        else:
            self._crash_at = time.monotonic() + CRASH_ARM_S
            exit_soon(CRASH_FALLBACK_S, CRASH_EXIT_CODE)
        return now

    def on_device_call(self) -> None:
        """Called at the start of every device call: exits the process once ``crash`` is
        armed, blocks forever once ``hang`` is set."""
        if time.monotonic() >= self._crash_at:
            import os

            os._exit(CRASH_EXIT_CODE)
        if self._hung.is_set():
            self._never.wait()

    def sticky_error(self) -> str | None:
        return INJECTED_CUDA_ERROR if self.poisoned else None


def replica_id() -> str:
    """This replica's Serve id (drills and logs name the replica they hit); "local" outside."""
    from ray import serve

    try:
        return serve.get_replica_context().replica_id.unique_id
    except Exception:  # not running inside a Serve replica
        return "local"
