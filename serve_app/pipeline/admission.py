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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

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


T = TypeVar("T")


@dataclass(eq=False)
class Waiter(Generic[T]):
    """A queued request: its class, arrival order and what its owner knows it by."""

    traffic_class: TrafficClass
    seq: int
    token: T

    def order(self) -> tuple[int, int]:
        return (self.traffic_class.rank, self.seq)


class LaneCore(Generic[T]):
    """A lane's decisions without a clock or an event loop: who starts, who waits, who is shed,
    who starts when a slot frees. ``Lane`` runs it for the app with futures as tokens;
    ``fleet.engine`` runs it on a simulated clock with its requests as tokens.

    max_in_flight : requests running at once; max_queued : requests waiting at most;
    offline_max_share : the share of max_in_flight offline requests may hold (0..1);
    on_displaced : called with a waiter an online request pushed out of a full queue and the
    ``Overloaded`` to answer it with.
    """

    def __init__(
        self,
        name: str,
        max_in_flight: int,
        max_queued: int,
        offline_max_share: float = 0.5,
        on_displaced: Callable[[Waiter[T], Overloaded], None] | None = None,
    ) -> None:
        if max_in_flight < 1 or max_queued < 0 or not 0 <= offline_max_share <= 1:
            raise ValueError(
                f"lane {name}: max_in_flight >= 1, max_queued >= 0, 0 <= offline_max_share <= 1"
            )
        self.name = name
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.offline_cap = max(1, math.floor(offline_max_share * max_in_flight))
        self.on_displaced = on_displaced
        self.stats = LaneStats()
        self._running: Counter[TrafficClass] = Counter()
        self._waiters: list[Waiter[T]] = []  # kept sorted: online first, then arrival
        self._seq = itertools.count()
        self._service_s: float | None = None  # moving average of slot hold times

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

    def admit(self, cls: TrafficClass, remaining_s: float, token: T) -> Waiter[T] | None:
        """None: the request starts now and holds a slot until ``release``. A ``Waiter``: it
        is queued until a ``release`` or ``drop`` grants it a slot, or its owner ``drop``s it.

        Raises Overloaded("queue_full") when the queue is full, Overloaded("deadline") when
        the expected wait already exceeds ``remaining_s`` (seconds to its deadline)."""
        return None if self.try_start(cls) else self.enqueue(cls, remaining_s, token)

    def try_start(self, cls: TrafficClass) -> bool:
        """Whether a request of ``cls`` starts now (then it holds a slot until ``release``)."""
        if not self._waiters_ahead(cls) and self._can_start(cls):
            self._grant(cls)
            return True
        return False

    def enqueue(self, cls: TrafficClass, remaining_s: float, token: T) -> Waiter[T]:
        """Queue a request that could not ``try_start``; raises as ``admit``."""
        if len(self._waiters) >= self.max_queued and not self._displace_for(cls):
            raise self.shed("queue_full")
        if self._service_s is not None:
            ahead = sum(1 for w in self._waiters if w.order() <= (cls.rank, math.inf))
            expected = (ahead + 1) * self._service_s / self.max_in_flight + self._service_s
            if remaining_s < expected:
                raise self.shed("deadline")
        if remaining_s <= 0:
            raise self.shed("deadline")
        waiter = Waiter(cls, next(self._seq), token)
        self._insert(waiter)
        self.stats.queued += 1
        return waiter

    def release(self, cls: TrafficClass, held_s: float) -> list[Waiter[T]]:
        """A slot of class ``cls`` held ``held_s`` seconds is free: the waiters it lets start
        (each now holding a slot), best first."""
        self._running[cls] -= 1
        self._service_s = (
            held_s if self._service_s is None else 0.9 * self._service_s + 0.1 * held_s
        )
        return self._wake()

    def drop(self, waiter: Waiter[T]) -> tuple[bool, list[Waiter[T]]]:
        """A waiter given up by its owner (its deadline, a cancel): whether it was still
        queued (False: it had been granted a slot, which its owner must ``release``), and the
        waiters that start now."""
        queued = waiter in self._waiters
        if queued:
            self._waiters.remove(waiter)
        return queued, self._wake()

    def shed(self, reason: str) -> Overloaded:
        """The answer to a request shed for ``reason`` (counted)."""
        self.stats.shed[reason] += 1
        return Overloaded(
            reason,
            self.retry_after_s(),
            f"{self.name}: shed ({reason}); {self.in_flight} running, {len(self._waiters)} queued",
        )

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

    def _grant(self, cls: TrafficClass) -> None:
        self._running[cls] += 1
        self.stats.admitted += 1

    def _wake(self) -> list[Waiter[T]]:
        """Hand freed slots to waiters, best first, while their class may start."""
        granted = []
        while self._waiters and self._can_start_waiter(self._waiters[0]):
            head = self._waiters.pop(0)
            self._grant(head.traffic_class)
            granted.append(head)
        return granted

    def _can_start_waiter(self, head: Waiter[T]) -> bool:
        if self.in_flight >= self.max_in_flight:
            return False
        if head.traffic_class is TrafficClass.OFFLINE:
            # Sorted: an offline head means no online waiter is left.
            return self._running[TrafficClass.OFFLINE] < self.offline_cap
        return True

    def _insert(self, waiter: Waiter[T]) -> None:
        k = len(self._waiters)
        while k > 0 and self._waiters[k - 1].order() > waiter.order():
            k -= 1
        self._waiters.insert(k, waiter)

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
        if self.on_displaced is not None:
            exc = Overloaded(
                "displaced", self.retry_after_s(), "offline request displaced by online"
            )
            self.on_displaced(victim, exc)
        return True


class Lane(LaneCore["asyncio.Future[Permit]"]):
    """A ``LaneCore`` on the event loop: ``acquire`` a ``Permit`` now or after a bounded wait.

    max_in_flight : requests running at once; max_queued : requests waiting at most;
    offline_max_share : the share of max_in_flight offline requests may hold (0..1)."""

    def __init__(
        self,
        name: str,
        max_in_flight: int,
        max_queued: int,
        offline_max_share: float = 0.5,
        clock: Clock = time.monotonic,
    ) -> None:
        super().__init__(name, max_in_flight, max_queued, offline_max_share, self._displaced)
        self.clock = clock

    async def acquire(self, ctx: CallContext) -> Permit:
        """A permit for ``ctx``'s request, now or after a bounded wait.

        Raises Overloaded("queue_full") when the queue is full, Overloaded("deadline") when the
        expected wait already exceeds the deadline or the deadline passes while queued.
        """
        cls = ctx.traffic_class
        if self.try_start(cls):
            return Permit(self, cls, self.clock())
        future: asyncio.Future[Permit] = asyncio.get_running_loop().create_future()
        waiter = self.enqueue(cls, ctx.remaining_s(), future)
        enqueued = self.clock()
        try:
            permit = await asyncio.wait_for(asyncio.shield(future), ctx.remaining_s())
        except TimeoutError:
            self._give_up(waiter)
            raise self.shed("deadline") from None
        except asyncio.CancelledError:
            self._give_up(waiter)
            raise
        permit.waited_s = self.clock() - enqueued
        return permit

    # ---- inside -----------------------------------------------------------------------------
    def _release(self, permit: Permit) -> None:
        self._start(self.release(permit.traffic_class, self.clock() - permit.started))

    def _start(self, granted: list[Waiter[asyncio.Future[Permit]]]) -> None:
        for w in granted:
            permit = Permit(self, w.traffic_class, self.clock())
            if w.token.done():  # cancelled meanwhile: the slot goes back
                permit.release()
            else:
                w.token.set_result(permit)

    def _give_up(self, waiter: Waiter[asyncio.Future[Permit]]) -> None:
        queued, granted = self.drop(waiter)
        future = waiter.token
        if not queued and future.done() and not future.cancelled() and not future.exception():
            future.result().release()  # granted in the same instant: give it back
        self._start(granted)

    @staticmethod
    def _displaced(waiter: Waiter[asyncio.Future[Permit]], exc: Overloaded) -> None:
        waiter.token.set_exception(exc)


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
