"""Ending a replica's own process on purpose, shortly after the refusals already sent.

Used by the device guard (a poisoned CUDA context only clears with a new process) and by the
drills' injected crash; neither imports the other.
"""

from __future__ import annotations

import threading

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
