"""Admission: decide at the door whether a request may start, wait briefly, or be shed.

Each family of endpoints has a ``Lane``: a budget of requests in flight and a short, bounded
queue in front of it. A request is admitted at once while the budget has room; otherwise it
waits in the queue (online before offline, oldest first) until a permit frees or its deadline
comes; when the queue is full, or the wait it would face already exceeds its deadline, it is
shed at once with a retry hint. Nothing waits without a bound, so overload costs a fast 503
instead of a queue that grows into timeouts.

Offline requests get what online ones leave: they start only while no online request waits and
hold at most ``offline_max_share`` of the budget, and an online request arriving at a full queue
takes the place of the newest offline one.

A ``Permit`` is released exactly once (``async with``); its hold time is the lane's service
time estimate, which turns queue length into an expected wait and a Retry-After.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections import Counter
from dataclasses import dataclass, field

from domain import TrafficClass
from serve_app.pipeline.context import CallContext, Clock
from serve_app.pipeline.errors import Overloaded


@dataclass
class LaneStats:
    """Counters since start: admitted, shed by reason ("queue_full", "deadline",
    "displaced"), and how many waited in the queue first."""

    admitted: int = 0
    queued: int = 0
    shed: Counter[str] = field(default_factory=Counter)


class Permit:
    """The right to run one request in a lane; ``release`` once (repeats are ignored)."""

    def __init__(self, lane: Lane, traffic_class: TrafficClass, started: float) -> None:
        self.lane, self.traffic_class, self.started = lane, traffic_class, started
        self.waited_s = 0.0
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self.lane._release(self)

    async def __aenter__(self) -> Permit:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()


@dataclass(eq=False)
class _Waiter:
    traffic_class: TrafficClass
    seq: int
    future: asyncio.Future[Permit]

    def order(self) -> tuple[int, int]:
        return (self.traffic_class.rank, self.seq)


class Lane:
    """max_in_flight : requests running at once; max_queued : requests waiting at most;
    offline_max_share : the share of max_in_flight offline requests may hold (0..1)."""

    def __init__(
        self,
        name: str,
        max_in_flight: int,
        max_queued: int,
        offline_max_share: float = 0.5,
        clock: Clock = time.monotonic,
    ) -> None:
        if max_in_flight < 1 or max_queued < 0 or not 0 <= offline_max_share <= 1:
            raise ValueError(
                f"lane {name}: max_in_flight >= 1, max_queued >= 0, 0 <= offline_max_share <= 1"
            )
        self.name = name
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.offline_cap = max(1, math.floor(offline_max_share * max_in_flight))
        self.clock = clock
        self.stats = LaneStats()
        self._running: Counter[TrafficClass] = Counter()
        self._waiters: list[_Waiter] = []  # kept sorted: online first, then arrival
        self._seq = itertools.count()
        self._service_s: float | None = None  # moving average of permit hold times

    # ---- what callers see -------------------------------------------------------------------
    @property
    def in_flight(self) -> int:
        return sum(self._running.values())

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def retry_after_s(self) -> float:
        """When a retry is likely to find room: the current queue's expected drain time, >= 1 s."""
        if self._service_s is None:
            return 1.0
        drain = (len(self._waiters) + 1) * self._service_s / self.max_in_flight
        return max(1.0, drain)

    async def acquire(self, ctx: CallContext) -> Permit:
        """A permit for ``ctx``'s request, now or after a bounded wait.

        Raises Overloaded("queue_full") when the queue is full, Overloaded("deadline") when the
        expected wait already exceeds the deadline or the deadline passes while queued.
        """
        cls = ctx.traffic_class
        if not self._waiters_ahead(cls) and self._can_start(cls):
            return self._grant(cls, waited_s=0.0)
        if len(self._waiters) >= self.max_queued and not self._displace_for(cls):
            raise self._shed("queue_full")
        if self._service_s is not None:
            ahead = sum(1 for w in self._waiters if w.order() <= (cls.rank, math.inf))
            expected = (ahead + 1) * self._service_s / self.max_in_flight + self._service_s
            if ctx.remaining_s() < expected:
                raise self._shed("deadline")
        remaining = ctx.remaining_s()
        if remaining <= 0:
            raise self._shed("deadline")
        waiter = _Waiter(cls, next(self._seq), asyncio.get_running_loop().create_future())
        self._insert(waiter)
        self.stats.queued += 1
        enqueued = self.clock()
        try:
            permit = await asyncio.wait_for(asyncio.shield(waiter.future), remaining)
        except TimeoutError:
            self._drop(waiter)
            raise self._shed("deadline") from None
        except asyncio.CancelledError:
            self._drop(waiter)
            raise
        permit.waited_s = self.clock() - enqueued
        return permit

    # ---- inside -----------------------------------------------------------------------------
    def _can_start(self, cls: TrafficClass) -> bool:
        if self.in_flight >= self.max_in_flight:
            return False
        if cls is TrafficClass.OFFLINE:
            online_waiting = any(w.traffic_class is TrafficClass.ONLINE for w in self._waiters)
            return not online_waiting and self._running[cls] < self.offline_cap
        return True

    def _waiters_ahead(self, cls: TrafficClass) -> bool:
        return any(w.traffic_class.rank <= cls.rank for w in self._waiters)

    def _grant(self, cls: TrafficClass, waited_s: float) -> Permit:
        self._running[cls] += 1
        self.stats.admitted += 1
        permit = Permit(self, cls, self.clock())
        permit.waited_s = waited_s
        return permit

    def _release(self, permit: Permit) -> None:
        self._running[permit.traffic_class] -= 1
        held = self.clock() - permit.started
        self._service_s = held if self._service_s is None else 0.9 * self._service_s + 0.1 * held
        self._wake()

    def _wake(self) -> None:
        """Hand freed permits to waiters, best first, while their class may start."""
        while self._waiters:
            head = self._waiters[0]
            if head.future.done():  # cancelled or timed out, not yet dropped
                self._waiters.pop(0)
                continue
            if not self._can_start_waiter(head):
                return
            self._waiters.pop(0)
            head.future.set_result(self._grant(head.traffic_class, waited_s=0.0))

    def _can_start_waiter(self, head: _Waiter) -> bool:
        if self.in_flight >= self.max_in_flight:
            return False
        if head.traffic_class is TrafficClass.OFFLINE:
            # Sorted: an offline head means no online waiter is left.
            return self._running[TrafficClass.OFFLINE] < self.offline_cap
        return True

    def _insert(self, waiter: _Waiter) -> None:
        k = len(self._waiters)
        while k > 0 and self._waiters[k - 1].order() > waiter.order():
            k -= 1
        self._waiters.insert(k, waiter)

    def _drop(self, waiter: _Waiter) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)
        elif waiter.future.done() and not waiter.future.cancelled():
            waiter.future.result().release()  # granted in the same instant: give it back
        self._wake()

    def _displace_for(self, cls: TrafficClass) -> bool:
        """At a full queue an online request takes the newest offline waiter's place."""
        if cls is not TrafficClass.ONLINE:
            return False
        offline = [w for w in self._waiters if w.traffic_class is TrafficClass.OFFLINE]
        if not offline:
            return False
        victim = offline[-1]
        self._waiters.remove(victim)
        self.stats.shed["displaced"] += 1
        victim.future.set_exception(
            Overloaded("displaced", self.retry_after_s(), "offline request displaced by online")
        )
        return True

    def _shed(self, reason: str) -> Overloaded:
        self.stats.shed[reason] += 1
        return Overloaded(
            reason,
            self.retry_after_s(),
            f"{self.name}: shed ({reason}); {self.in_flight} running, {len(self._waiters)} queued",
        )


class Admission:
    """The lanes by name (``"dispatch"``, ``"etr"``, ``"solve"``)."""

    def __init__(self, lanes: dict[str, Lane]) -> None:
        self.lanes = lanes

    async def acquire(self, lane: str, ctx: CallContext) -> Permit:
        return await self.lanes[lane].acquire(ctx)

    def describe(self) -> dict[str, dict[str, object]]:
        """Per lane: in flight, queued now, admitted and shed counts (for /readyz, metrics)."""
        return {
            name: {
                "in_flight": lane.in_flight,
                "queued": lane.waiting,
                "max_in_flight": lane.max_in_flight,
                "max_queued": lane.max_queued,
                "admitted": lane.stats.admitted,
                "shed": dict(lane.stats.shed),
            }
            for name, lane in self.lanes.items()
        }
