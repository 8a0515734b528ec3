"""Finding and ending processes by what they run (Linux ``/proc``): what a local start
left behind, a child that must go with its parent."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def processes_mentioning(needles: tuple[str, ...]) -> list[int]:
    """Pids of the processes (not this one) whose command line contains one of ``needles``."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(n in cmdline for n in needles):
            pids.append(int(proc.name))
    return pids


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def kill_processes_mentioning(needle: str, grace_s: float = 2.0) -> list[int]:
    """SIGTERM (then SIGKILL after ``grace_s``) every process whose command line contains
    ``needle``; their pids."""
    return end(processes_mentioning((needle,)), grace_s)


def end(pids: list[int], grace_s: float = 2.0) -> list[int]:
    """SIGTERM ``pids``, SIGKILL those still running after ``grace_s``, reap those that are
    this process's children; the pids."""
    pids = list(pids)
    ended = list(pids)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if running(p)]
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in ended:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    return ended


def running(pid: int) -> bool:
    """Alive and not a zombie (an exited child its parent has not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def replica_pids(deployment: str, app: str = "orml") -> list[int]:
    """The pids of ``app``'s ``deployment`` replicas on this machine (Ray titles a replica's
    process ``ray::ServeReplica:<app>:<deployment>``)."""
    title = f"ServeReplica:{app}:{deployment}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if title in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def children_of(pid: int) -> list[int]:
    """The direct child processes of ``pid``."""
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        found: list[int] = []
        for task in tasks:
            text = (task / "children").read_text().split()
            found += [int(c) for c in text]
        return sorted(set(found))
    except OSError:
        return []
