"""A replayed MDRP day as it stands at a minute, and what the replay made final.

``DayState`` holds what the replay's policies read and change: each courier's place and when
it is free, the orders placed so far, and the notes of this round's chosen plan (which
couriers it holds, each open order's drop-off in it). The records it makes final are
``Bundle`` and ``Move``, collected in a ``Replay``.

Travel here is MDRP's exact rule (ceil of distance / speed, whole minutes); the dispatch
sees the same positions as ``LatLng`` (``latlng``) and straight-line travel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from domain import DispatchRound, LatLng, Order
from domain.geo import EARTH_RADIUS_M
from planner.mdrp.instance import Courier, MdrpInstance, MdrpOrder

_DEG_PER_M = 180.0 / (math.pi * EARTH_RADIUS_M)
#: Late minutes an order a plan leaves open is priced at: it waits at least a round for
#: another chance.
UNPLANNED_MIN = 10.0


def latlng(x: float, y: float) -> LatLng:
    # MDRP positions are metres on a plane; about (0, 0) the round's local projection maps these
    # degrees back to the same metres (to ~1e-5 relative), so distances are the instance's.
    return LatLng(y * _DEG_PER_M, x * _DEG_PER_M)


def minute(t: float) -> int:
    # Service halves of odd service times are fractional; MDRP times are whole minutes.
    return math.ceil(t - 1e-9)


@dataclass
class CourierState:
    courier: Courier
    place: str  # "0" (its start), a restaurant id or an order id (that order's customer)
    x: float
    y: float
    free_at: int  # minute it can leave ``place``


@dataclass(frozen=True)
class Bundle:
    """One instruction: ``courier`` picks up ``orders`` (drop-off order) at ``restaurant``."""

    assigned_at: int
    courier: str
    restaurant: str
    orders: tuple[str, ...]
    pickup: int
    dropoffs: tuple[int, ...]


@dataclass(frozen=True)
class Move:
    courier: str
    depart: int
    origin: str
    destination: str


@dataclass
class Replay:
    """What a replayed day decided: bundles and moves in time order, undelivered order ids."""

    instance: str
    bundles: list[Bundle] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    undelivered: list[str] = field(default_factory=list)
    rounds: int = 0
    plans: int = 0  # dispatch calls (a round plans again without couriers past their shift)
    rollouts: int = 0  # rollouts run (one per thing a round's plans do now)
    rollout_plans: int = 0  # the rollouts' dispatch calls (counted in plans too)
    dispatch_ms: float = 0.0
    plan_ms: list[float] = field(default_factory=list)  # per plan: every variant, the pricing

    def count_rollout(self, seen: Replay) -> None:
        """Count a rollout whose copy of the day decided ``seen``."""
        self.rollouts += 1
        self.plans += seen.plans
        self.rollout_plans += seen.plans
        self.dispatch_ms += seen.dispatch_ms


class DayState:
    """``instance`` at a minute: couriers, the orders seen so far, this round's plan notes.

    planned : couriers this round's chosen plan holds an order for; short : this round has
    more open orders than free couriers; drop_in_plan : each open order's drop-off minute in
    the chosen plan (``plan_drops``); plan_late : that plan leaves some order late."""

    def __init__(self, instance: MdrpInstance) -> None:
        self.inst = instance
        p = instance.params
        self.half_pickup, self.half_dropoff = p.pickup_service / 2, p.dropoff_service / 2
        self.speed_mps = p.meters_per_minute / 60.0
        self.couriers = {c.id: CourierState(c, "0", c.x, c.y, c.on) for c in instance.couriers}
        self.orders = {o.id: o for o in instance.orders}
        self.domain_orders = {o.id: self._order(o) for o in instance.orders}
        self.placed: list[MdrpOrder] = []  # by placement time
        self.planned: set[str] = set()
        self.short = False
        self.drop_in_plan: dict[str, float] = {}
        self.plan_late = False

    def fork(self) -> DayState:
        """This day as it stands, for a rollout: couriers and plan notes copied, the instance,
        its orders and the orders seen so far shared (read only). The copy forgets the
        plan's expected drop-offs."""
        fork = object.__new__(DayState)
        fork.__dict__.update(self.__dict__)
        fork.couriers = {  # field by field: dataclasses.replace is slow on a rollout's hot path
            cid: CourierState(s.courier, s.place, s.x, s.y, s.free_at)
            for cid, s in self.couriers.items()
        }
        fork.planned = set(self.planned)
        fork.drop_in_plan = {}
        return fork

    def travel(self, a: tuple[float, float], b: tuple[float, float]) -> int:
        return self.inst.travel_minutes(a, b)

    def _order(self, o: MdrpOrder) -> Order:
        r = self.inst.restaurants[o.restaurant]
        return Order(
            id=o.id,
            pickup=latlng(r.x, r.y),
            dropoff=latlng(o.x, o.y),
            created_at=o.placed * 60.0,
            # The dispatch starts a pickup's service once the food is ready; MDRP picks up at
            # the service's middle, so its service may start half a service earlier. Given
            # MDRP's ready time, the dispatch would see a courier on time leave half a service
            # later than it does and a late one exactly, underrating lateness (docs/mdrp.md).
            ready_at=(o.ready - self.half_pickup) * 60.0,
            promised_at=self._earliest_arrival(o) * 60.0,
            pickup_service_s=self.inst.params.pickup_service * 60.0,
            dropoff_service_s=self.inst.params.dropoff_service * 60.0,
        )

    def _earliest_arrival(self, o: MdrpOrder) -> float:
        """The minute a courier waiting at the restaurant when the food is ready reaches the door
        (before the drop-off service), on the dispatch's clock (straight-line travel, not
        rounded up): due then, every minute later is a minute of click-to-door the plan added.
        Lateness counts at the door, as the dispatch measures it (counted after the drop-off
        service, every plan would get half a service of free lateness)."""
        r = self.inst.restaurants[o.restaurant]
        ride = math.hypot(r.x - o.x, r.y - o.y) / self.inst.params.meters_per_minute
        return o.ready + self.half_pickup + ride

    def due_now(self, oid: str, t: int) -> Order:
        """Order ``oid`` due at the earliest arrival still possible at minute ``t``.

        Lateness already built up is sunk: priced against the original promise, an order that
        has waited would cost more to assign than a fresh one whatever courier takes it, and
        with couriers short (the assignment leaves the dearest orders out) it would keep
        waiting: starvation. Re-based, every order is priced by the delay a courier adds."""
        order = self.domain_orders[oid]
        ride = order.promised_at - order.ready_at  # pickup service + ride + half a drop-off
        due = max(order.promised_at, t * 60.0 + ride)
        return order if due == order.promised_at else replace(order, promised_at=due)

    def due_minutes(self, round_: DispatchRound) -> dict[str, float]:
        """Each of the round's orders' earliest drop-off still possible, on MDRP's clock
        (minutes, after half the drop-off service)."""
        return {o.id: o.promised_at / 60.0 + self.half_dropoff for o in round_.orders}

    def plan_schedule(
        self, t: int, chosen: dict[str, str], open_: dict[str, MdrpOrder]
    ) -> list[tuple[str, float, int]]:
        """(order id, drop-off minute, minutes driven for it) per planned order, on MDRP's
        clock: each courier does its planned orders one by one, the earliest-ready first, from
        where and when it is free."""
        by_courier: dict[str, list[MdrpOrder]] = {}
        for oid, cid in chosen.items():
            if oid in open_:
                by_courier.setdefault(cid, []).append(open_[oid])
        out = []
        for cid, orders in by_courier.items():
            state = self.couriers[cid]
            when = max(t, state.free_at, state.courier.on)
            here = (state.x, state.y)
            for o in sorted(orders, key=lambda o: (o.ready, o.id)):
                rest = self.inst.restaurants[o.restaurant]
                to_rest = self.travel(here, (rest.x, rest.y))
                ride = self.travel((rest.x, rest.y), (o.x, o.y))
                pickup = max(o.ready, when + to_rest + self.half_pickup)
                drop = pickup + self.half_pickup + ride + self.half_dropoff
                out.append((o.id, drop, to_rest + ride))
                when, here = drop + self.half_dropoff, (o.x, o.y)
        return out

    def note_plan(
        self,
        t: int,
        due_min: dict[str, float],
        chosen: dict[str, str],
        open_: dict[str, MdrpOrder],
    ) -> None:
        """Note the chosen plan: the couriers it holds, each open order's drop-off minute in
        it (unplanned: the earliest still possible, ``due_min``, plus ``UNPLANNED_MIN``), and
        whether it leaves some order late (more than a minute past the earliest possible)."""
        self.planned |= set(chosen.values())
        self.drop_in_plan = {oid: d + UNPLANNED_MIN for oid, d in due_min.items()}
        self.drop_in_plan |= {oid: drop for oid, drop, _ in self.plan_schedule(t, chosen, open_)}
        self.plan_late = any(self.drop_in_plan[oid] > d + 1.0 for oid, d in due_min.items())
