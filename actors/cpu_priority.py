"""A process's CPU priority against the other processes of its host.

Ray starts every worker, so every Serve replica, at one niceness (its ``worker_niceness``, 15).
On a host where the replicas share cores with each other, with the proxy and with whatever
else runs there, the operating system then treats the request path's front, the device's
owner and batch work alike whenever more of them want a core than there are cores.

* ``lower_priority``: offline solves' child processes (``actors.offline_process``) run only on
  what online work leaves (``SCHED_IDLE``) or at nice 19.
* ``raise_priority``: the Ingress replicas run a few steps above the other replicas
  (``DispatchAppArgs.ingress_priority_steps``). An admitted round's every stage but the solve
  runs on the ingress's one event loop, so under overload, when the proxy, the kernel and the
  clients' connections want the cores too, the ingress is the stage that falls behind and
  takes goodput with it (``bench/overload.py``). It does only
  admitted work (the admission lanes bound it), so above the other replicas it cannot starve
  them; it only wins the cores when it has rounds to move.

Linux keeps a niceness per thread: a process's threads are each set (``/proc/self/task``),
and threads started later inherit their creator's. Raising a priority needs ``CAP_SYS_NICE``
or a ``RLIMIT_NICE`` allowing it; where neither does, nothing changes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

CpuPolicy = Literal["idle", "nice", "thread"]

#: The niceness the operating system lets no ordinary task go below.
HIGHEST = -20
#: The lowest ordinary priority.
LOWEST = 19


def lower_priority(policy: CpuPolicy) -> str:
    """Lower this process's CPU priority; what was applied ("SCHED_IDLE", "nice 19")."""
    if policy == "idle" and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "SCHED_IDLE"
        except OSError:
            pass  # not allowed here: nice is
    os.nice(LOWEST - os.nice(0))
    return "nice 19"


def raise_priority(steps: int) -> str:
    """Every thread of this process ``steps`` niceness steps higher (a lower nice value) than
    the calling thread runs now; what was applied ("nice 12", or why not).

    Raises ValueError for a negative ``steps`` (use ``lower_priority``)."""
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    if steps == 0:
        return "unchanged"
    target = max(HIGHEST, os.getpriority(os.PRIO_PROCESS, 0) - steps)
    tasks = Path("/proc/self/task")
    tids = [int(p.name) for p in tasks.iterdir()] if tasks.is_dir() else [0]
    try:
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, target)
            except ProcessLookupError:
                continue  # the thread ended meanwhile
    except PermissionError:
        return "unchanged (raising a priority needs CAP_SYS_NICE)"
    return f"nice {target}"
