"""Offline static solves in a child process the operating system runs after online work.

A solver replica's online rounds and offline static solves share its CPU (or device). The
``PriorityGate`` makes an offline solve step aside between its iterations, but inside an
iteration it competes with online work as an equal: for the GIL in the replica's process
(the compiled kernels hold it) and, for the CPU, with every other process of the box (the
ingress, other replicas). A thread's nice value cannot help with the first and makes the
second worse (a low-priority thread holding the GIL stalls the online thread behind it).

So the replica runs its offline solves in child processes of its own (``processes``, one
solve each at a time), started at the replica's start, whose scheduling policy is

* ``idle``: ``SCHED_IDLE``, run only when no other task wants the CPU (Linux);
* ``nice``: nice 19, the lowest ordinary priority (about 1.5% of a nice-0 task's share when
  both want the CPU), for systems without ``SCHED_IDLE``;

and ``thread`` (``OfflineSolves(priority="thread")``) keeps the solve in the replica's worker
thread, the behaviour before this module. The child still steps aside between iterations while
online calls run in the replica (their count is mirrored into shared memory), stops at its
caller's deadline or cancellation (a shared event), and ends when its replica does (its pipe
closes). A solve's time limit is wall-clock: a solve starved by online work ends at its limit
with what it found, like one on a busy device.

A child that dies (killed, out of memory) is never handed work again: its solve goes once to
a fresh child started in its place (the solve is a pure function of its instance), and a
second death answers ``WorkerLost`` (retryable: 503). ``check`` fails while a child cannot be
started, which the replica's health check reports.

Work crosses the pipe as pickles between the replica and its own child, never from a network
or a cache.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import queue
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from actors.abandon import Abandon
from actors.cpu_priority import CpuPolicy, lower_priority
from actors.errors import Abandoned, WorkerLost

POLICIES: tuple[CpuPolicy, ...] = ("idle", "nice", "thread")
#: How often the replica looks at its caller while the child computes (cancellation latency).
POLL_S = 0.02
#: How often a stepping-aside child looks whether the online calls are done.
STEP_ASIDE_POLL_S = 0.001


class _ChildEnded(RuntimeError):
    """The child process is gone (before or during a solve)."""


class _Child:
    """One low-priority child process and the pipe and cancel event it listens to."""

    def __init__(self, ctx: Any, online: Any, policy: CpuPolicy) -> None:
        self.cancel = ctx.Event()
        self.conn, child_end = ctx.Pipe()
        self.proc = ctx.Process(
            target=_child_main,
            args=(child_end, online, self.cancel, policy),
            name="orml-offline-solves",
            daemon=True,
        )
        self.proc.start()
        child_end.close()

    def solve(
        self, instance: Any, time_limit_s: float, seed: int, abandon: Abandon
    ) -> tuple[str, Any, int, float]:
        if not self.proc.is_alive():
            raise _ChildEnded(f"the offline solve process ended ({self.proc.exitcode})")
        self.cancel.clear()
        remaining = abandon.remaining_s()
        try:
            self.conn.send(
                (instance, time_limit_s, seed, None if remaining == math.inf else remaining)
            )
        except OSError as e:  # died after the check above, before it was reaped
            raise _ChildEnded(f"the offline solve process ended before its solve: {e!r}") from e
        while not self.conn.poll(POLL_S):
            if abandon.cancelled:
                self.cancel.set()
            if not self.proc.is_alive():
                raise _ChildEnded(
                    f"the offline solve process ended ({self.proc.exitcode}) mid-solve"
                )
        try:
            return self.conn.recv()
        except (EOFError, OSError) as e:
            raise _ChildEnded(f"the offline solve process ended mid-solve: {e!r}") from e

    def close(self) -> None:
        if self.proc.is_alive():
            self.conn.close()  # the child's recv ends: it exits
            self.proc.join(2.0)
            if self.proc.is_alive():
                # Still warming up (a cold kernel cache compiles for seconds) and not reading:
                # killed, and reaped so that no zombie outlives the pool.
                self.proc.kill()
                self.proc.join()


class OfflineSolves:
    """Runs ``planner.pdptw.solve`` for one replica.

    priority : "idle" | "nice" (low-priority child processes) or "thread" (in the caller's
    thread, the replica's process and priority). processes : child processes, so solves at
    once (more wait for a free one); one uses at most one core of what online work leaves.
    """

    def __init__(self, priority: CpuPolicy = "idle", processes: int = 1) -> None:
        if priority not in POLICIES:
            raise ValueError(f"offline priority must be one of {POLICIES}, not {priority!r}")
        if processes < 1:
            raise ValueError(f"offline processes must be >= 1, not {processes}")
        self.priority = priority
        self.yields = 0
        self.yielded_s = 0.0
        self.restarts = 0  # children replaced after they died
        self._start_error: str | None = None  # why the last replacement failed to start
        self._stats_lock = threading.Lock()
        self._children: list[_Child] = []
        self._free: queue.SimpleQueue[_Child] = queue.SimpleQueue()
        if priority != "thread":
            self._ctx = mp.get_context("spawn")  # a Ray worker has threads: never fork it
            self._online = self._ctx.Value("i", 0)
            self._children = [_Child(self._ctx, self._online, priority) for _ in range(processes)]
            for child in self._children:
                self._free.put(child)

    @property
    def in_children(self) -> bool:
        """Whether solves run in child processes (not in the caller's thread)."""
        return bool(self._children)

    @property
    def pids(self) -> list[int]:
        return [c.proc.pid for c in self._children]

    @contextmanager
    def online(self) -> Iterator[None]:
        """Held by an online call while it computes: the children step aside (the thread
        policy steps aside through the replica's ``PriorityGate`` instead)."""
        if not self._children:
            yield
            return
        self._add_online(1)
        try:
            yield
        finally:
            self._add_online(-1)

    def _add_online(self, n: int) -> None:
        with self._online.get_lock():
            self._online.value += n

    def solve(
        self, instance: Any, time_limit_s: float, seed: int, abandon: Abandon, yield_to: Any
    ) -> Any:
        """``planner.pdptw.solve.solve``'s ``Solution``. yield_to : the thread policy's
        step-aside (the replica's ``PriorityGate``); the children step aside on their own.

        Raises ``Abandoned`` (cancelled or past the deadline), or what the solve raised."""
        if not self._children:
            from planner.pdptw.solve import solve

            return solve(
                instance,
                time_limit_s=time_limit_s,
                seed=seed,
                yield_to=yield_to,
                checkpoint=abandon.checkpoint,
            )
        child = self._free.get()
        try:
            for attempt in (1, 2):
                if not child.proc.is_alive():
                    child = self._replace(child)
                try:
                    kind, payload, yields, yielded_s = child.solve(
                        instance, time_limit_s, seed, abandon
                    )
                    break
                except _ChildEnded as e:
                    child = self._replace(child)
                    if attempt == 2 or abandon.cancelled:
                        raise WorkerLost(str(e)) from e
        finally:
            self._free.put(child)
        with self._stats_lock:
            self.yields += yields
            self.yielded_s += yielded_s
        if kind == "abandoned":
            raise Abandoned(payload)
        if kind == "error":
            raise RuntimeError(f"offline solve failed: {payload}")
        return payload

    def _replace(self, dead: _Child) -> _Child:
        """A fresh child in a dead one's place (the dead one reaped). Raises ``WorkerLost``
        when it cannot start (``check`` fails until one does)."""
        dead.close()
        try:
            fresh = _Child(self._ctx, self._online, self.priority)
        except Exception as e:
            self._start_error = f"{type(e).__name__}: {e}"
            raise WorkerLost(f"a new offline solve process could not start: {e}") from e
        self._start_error = None
        with self._stats_lock:
            self._children[self._children.index(dead)] = fresh
            self.restarts += 1
        return fresh

    def check(self) -> None:
        """Raises ``WorkerLost`` while a dead child could not be replaced (for the replica's
        health check); a dead child that was never asked for work is replaced here."""
        if self._start_error is not None:
            raise WorkerLost(f"no offline solve process: {self._start_error}")

    def close(self) -> None:
        for child in self._children:
            child.close()


def _child_main(conn: Any, online: Any, cancel: Any, policy: CpuPolicy) -> None:
    """The child: lower its priority, then solve what the replica sends until it goes away."""
    lower_priority(policy)
    from kernels.compiled import warm_up
    from planner.pdptw.solve import solve

    # The compiled kernels, loaded (or compiled, on a cold cache) before the first solve: loaded
    # lazily inside it, their loading would count against its time limit.
    warm_up()
    stats = {"yields": 0, "yielded_s": 0.0}

    def step_aside() -> float:
        if online.value <= 0:
            return 0.0
        t0 = time.monotonic()
        while online.value > 0 and not cancel.is_set():
            time.sleep(STEP_ASIDE_POLL_S)
        waited = time.monotonic() - t0
        stats["yields"] += 1
        stats["yielded_s"] += waited
        return waited

    while True:
        try:
            instance, time_limit_s, seed, timeout_s = conn.recv()
        except (EOFError, OSError):
            return  # the replica is gone
        abandon = Abandon(timeout_s)

        def checkpoint(abandon: Abandon = abandon) -> None:
            if cancel.is_set():
                abandon.cancel()
            abandon.checkpoint()

        stats.update(yields=0, yielded_s=0.0)
        try:
            sol = solve(
                instance,
                time_limit_s=time_limit_s,
                seed=seed,
                yield_to=step_aside,
                checkpoint=checkpoint,
            )
            reply = ("ok", sol)
        except Abandoned as e:
            reply = ("abandoned", e.why)
        except Exception as e:  # reported to the replica, which raises it
            reply = ("error", f"{type(e).__name__}: {e}"[:500])
        try:
            conn.send((*reply, stats["yields"], stats["yielded_s"]))
        except (BrokenPipeError, OSError):
            return
