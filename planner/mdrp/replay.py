"""A day of MDRP dispatch, replayed round by round through our dispatch (``dispatch_round``).

Discrete time in the instance's integer minutes. Every ``round_min`` minutes the orders placed
and not yet committed, and the couriers that are (or soon will be) on shift with time left to
pick up, become a ``DispatchRound``: a courier is a rider at the place and time it will be free
(MDRP couriers cannot be diverted, so only their last drop-off and its time matter), an order
is due at its target click-to-door. ``dispatch_round`` gives each order its best courier (one
order per courier per round, MDRP's one-restaurant bundles are formed at commitment).

What a decision becomes is ``ReplayPolicy``'s, and only what must be final now is made final:

* **Commit late.** An assignment is committed only when its courier is free now and must leave
  within this round to reach the restaurant by the food's ready time (or the food is ready).
  Otherwise the order stays open: the next round may find a better courier (one finishing a
  drop-off nearby) or a bundle partner, and the courier stays free for other orders.
* **Bundle one restaurant's orders.** A committed order takes along open orders of the same
  restaurant whose food is ready by the pickup (plus ``bundle_wait_min``), as long as every
  order in the bundle still arrives within the target click-to-door; drop-offs in nearest-first
  order. Fewer courier trips, at the cost of a few minutes for the later drop-offs.
* **Shifts.** No pickup after a courier's off time: a courier is offered only while it can
  reach a restaurant in time, and an assignment whose pickup would fall after the off time is
  not committed.

Travel in the decisions is the dispatch model's (straight line at the instance's speed); the
simulation itself uses MDRP's exact rule (ceil of distance / speed, whole minutes).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from domain import DispatchRound, DispatchWeights, LatLng, Order, Rider
from domain.geo import EARTH_RADIUS_M
from planner.dispatch_round import dispatch_round
from planner.mdrp.instance import Courier, Instance, MdrpOrder, Restaurant

_DEG_PER_M = 180.0 / (math.pi * EARTH_RADIUS_M)
MAX_LATENESS_S = 86_400.0  # no hard limit within a day (and what the served API accepts)


def _latlng(x: float, y: float) -> LatLng:
    # MDRP positions are metres on a plane; about (0, 0) the round's local projection maps these
    # degrees back to the same metres (to ~1e-5 relative), so distances are the instance's.
    return LatLng(y * _DEG_PER_M, x * _DEG_PER_M)


@dataclass(frozen=True)
class ReplayPolicy:
    """round_min : minutes between rounds; late_weight : minutes of travel one minute past the
    target click-to-door is worth; max_bundle : orders per bundle, at most; bundle_wait_min :
    how long past the planned pickup a bundled order's food may be ready; shift_margin_min :
    a courier is offered only with this long left before its off time; lookahead_min : a
    courier coming on shift this soon is offered already (it can be held for)."""

    round_min: int = 1
    late_weight: float = 4.0
    max_bundle: int = 3
    bundle_wait_min: int = 0
    shift_margin_min: int = 5
    lookahead_min: int = 10
    candidate_riders: int | None = 48
    commit_early_min: int = 0
    bundle_others: bool = False

    def __post_init__(self) -> None:
        if self.round_min < 1:
            raise ValueError(f"round_min must be >= 1, got {self.round_min}")
        if self.max_bundle < 1:
            raise ValueError(f"max_bundle must be >= 1, got {self.max_bundle}")


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
    depart: int
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
    dispatch_ms: float = 0.0


#: A round's decision maker: the in-process ``dispatch_round`` or a served endpoint's client.
Decide = Callable[[DispatchRound], dict[str, str]]


def decide_in_process(round_: DispatchRound) -> dict[str, str]:
    """order id -> rider id, from ``dispatch_round`` on the NumPy backend."""
    plan = dispatch_round(round_, backend="numpy", improve_routes=False)
    return {a.order_id: a.rider_id for a in plan.assignments}


class DaySimulator:
    """Replays ``instance`` under ``policy``; ``decide`` plans each round."""

    def __init__(
        self,
        instance: Instance,
        policy: ReplayPolicy = ReplayPolicy(),
        decide: Decide = decide_in_process,
    ) -> None:
        self.inst, self.policy, self.decide = instance, policy, decide
        p = instance.params
        self.half_pickup, self.half_dropoff = p.pickup_service / 2, p.dropoff_service / 2
        self.speed_mps = p.meters_per_minute / 60.0
        self.couriers = {c.id: CourierState(c, "0", c.x, c.y, c.on) for c in instance.couriers}
        self.orders = {o.id: o for o in instance.orders}
        self._domain_orders = {o.id: self._order(o) for o in instance.orders}

    def travel(self, a: tuple[float, float], b: tuple[float, float]) -> int:
        return self.inst.travel_minutes(a, b)

    def _order(self, o: MdrpOrder) -> Order:
        r = self.inst.restaurants[o.restaurant]
        return Order(
            id=o.id,
            pickup=_latlng(r.x, r.y),
            dropoff=_latlng(o.x, o.y),
            created_at=o.placed * 60.0,
            ready_at=o.ready * 60.0,
            promised_at=self._earliest_dropoff(o) * 60.0,
            pickup_service_s=self.inst.params.pickup_service * 60.0,
            dropoff_service_s=self.inst.params.dropoff_service * 60.0,
        )

    def _earliest_dropoff(self, o: MdrpOrder) -> float:
        """The drop-off minute with a courier waiting at the restaurant when the food is ready.

        Due then, every minute past it is a minute of click-to-door the plan added, and the
        dispatch prices it at ``late_weight`` minutes of driving."""
        r = self.inst.restaurants[o.restaurant]
        ride = self.travel((r.x, r.y), (o.x, o.y))
        return o.ready + self.half_pickup * 2 + ride + self.half_dropoff

    def run(self, progress: Callable[[int, int], None] | None = None) -> Replay:
        inst, policy = self.inst, self.policy
        out = Replay(inst.name)
        pending = list(inst.orders)  # by placement time
        open_: dict[str, MdrpOrder] = {}
        last_off = max(c.off for c in inst.couriers)
        t = min((o.placed for o in inst.orders), default=0)
        nxt = 0
        while t <= last_off and (nxt < len(pending) or open_):
            while nxt < len(pending) and pending[nxt].placed <= t:
                open_[pending[nxt].id] = pending[nxt]
                nxt += 1
            if open_:
                self._round(t, open_, out)
                out.rounds += 1
            if progress is not None:
                progress(t, last_off)
            t += policy.round_min
            if not open_ and nxt < len(pending):
                t = max(t, pending[nxt].placed)  # nothing to decide until the next order
        out.undelivered = sorted(open_) + [o.id for o in pending[nxt:]]
        out.bundles.sort(key=lambda b: (b.assigned_at, b.courier))
        return out

    # ---- one round ------------------------------------------------------------------------
    def _riders(self, t: int) -> list[Rider]:
        policy = self.policy
        riders = []
        for s in self.couriers.values():
            c = s.courier
            start = max(t, s.free_at, c.on)
            if c.on > t + policy.lookahead_min or c.off - start < policy.shift_margin_min:
                continue
            riders.append(
                Rider(
                    id=c.id,
                    position=_latlng(s.x, s.y),
                    speed_mps=self.speed_mps,
                    capacity=float(policy.max_bundle),
                    available_at=start * 60.0 if start > t else None,
                )
            )
        return riders

    def _round(self, t: int, open_: dict[str, MdrpOrder], out: Replay) -> None:
        import time

        riders = self._riders(t)
        if not riders:
            return
        weights = DispatchWeights(
            late_weight=self.policy.late_weight,
            max_lateness_s=MAX_LATENESS_S,
            max_orders_per_rider=self.policy.max_bundle,
            candidate_riders=self.policy.candidate_riders,
            etr_floor=False,  # travel here is exact geometry; see docs/mdrp.md
        )
        round_ = DispatchRound(
            now=t * 60.0,
            riders=tuple(riders),
            orders=tuple(self._domain_orders[oid] for oid in open_),
            weights=weights,
        )
        t0 = time.perf_counter()
        chosen = self.decide(round_)
        out.dispatch_ms += (time.perf_counter() - t0) * 1e3
        planned: dict[str, list[MdrpOrder]] = {}
        for oid, cid in chosen.items():
            if oid in open_:
                planned.setdefault(cid, []).append(open_[oid])
        # Per courier, its most urgent order leads; the courier whose lead's food is ready
        # first commits (and bundles) first.
        leads = {cid: min(orders, key=lambda o: (o.ready, o.id)) for cid, orders in planned.items()}
        for cid in sorted(leads, key=lambda c: (leads[c].ready, leads[c].id)):
            lead = leads[cid]
            if lead.id in open_:
                others = {oid for oid, c in chosen.items() if c != cid}
                self._maybe_commit(t, lead, self.couriers[cid], open_, out, others)

    def _maybe_commit(
        self,
        t: int,
        order: MdrpOrder,
        state: CourierState,
        open_: dict[str, MdrpOrder],
        out: Replay,
        taken: set[str],
    ) -> None:
        c = state.courier
        if state.free_at > t or c.on > t:
            return  # held: the courier is not free yet, the order may wait for it
        rest = self.inst.restaurants[order.restaurant]
        to_rest = self.travel((state.x, state.y), (rest.x, rest.y))
        slack = self.policy.round_min - 1 + self.policy.commit_early_min
        if order.ready - to_rest - self.half_pickup > t + slack:
            return  # no need to leave yet: decide again next round
        arrive = t + to_rest
        pickup = max(order.ready, arrive + self.half_pickup)
        if pickup > c.off:
            return
        bundle = self._bundle(order, rest, pickup, open_, taken)
        pickup = max([pickup] + [self.orders[o].ready for o in bundle])
        here, when, drops, moves = (rest.x, rest.y), pickup + self.half_pickup, [], []
        moves.append(Move(c.id, t, state.place, rest.id))
        place = rest.id
        for oid in bundle:
            o = self.orders[oid]
            moves.append(Move(c.id, _minute(when), place, oid))
            arrive = when + self.travel(here, (o.x, o.y))
            drops.append(_minute(arrive + self.half_dropoff))
            when, here, place = arrive + 2 * self.half_dropoff, (o.x, o.y), oid
            del open_[oid]
        out.moves.extend(moves)
        out.bundles.append(
            Bundle(t, c.id, rest.id, tuple(bundle), t, _minute(pickup), tuple(drops))
        )
        state.place, (state.x, state.y), state.free_at = place, here, _minute(when)

    def _bundle(
        self,
        first: MdrpOrder,
        rest: Restaurant,
        pickup: float,
        open_: dict[str, MdrpOrder],
        taken: set[str],
    ) -> list[str]:
        """``first`` plus open orders of its restaurant that fit (see the module's rules) and
        that the round did not plan for another courier (``taken``)."""
        target = self.inst.params.target_click_to_door
        bundle = [first.id]
        mates = sorted(
            (
                o
                for o in open_.values()
                if o.restaurant == first.restaurant
                and o.id != first.id
                and (self.policy.bundle_others or o.id not in taken)
                and o.ready <= pickup + self.policy.bundle_wait_min
            ),
            key=lambda o: (o.placed, o.id),
        )
        for mate in mates:
            if len(bundle) >= self.policy.max_bundle:
                break
            trial = self._drop_order([*bundle, mate.id], (rest.x, rest.y))
            start = max([pickup] + [self.orders[o].ready for o in trial])
            if all(c2d <= target for c2d in self._click_to_door(trial, (rest.x, rest.y), start)):
                bundle = trial
        return self._drop_order(bundle, (rest.x, rest.y))

    def _drop_order(self, ids: list[str], start: tuple[float, float]) -> list[str]:
        left, order, here = list(ids), [], start
        while left:
            best = min(
                left, key=lambda o: (self.travel(here, (self.orders[o].x, self.orders[o].y)), o)
            )
            order.append(best)
            left.remove(best)
            here = (self.orders[best].x, self.orders[best].y)
        return order

    def _click_to_door(
        self, ids: list[str], start: tuple[float, float], pickup: float
    ) -> list[float]:
        when, here, out = pickup + self.half_pickup, start, []
        for oid in ids:
            o = self.orders[oid]
            arrive = when + self.travel(here, (o.x, o.y))
            out.append(arrive + self.half_dropoff - o.placed)
            when, here = arrive + 2 * self.half_dropoff, (o.x, o.y)
        return out


def _minute(t: float) -> int:
    # Service halves of odd service times are fractional; MDRP times are whole minutes.
    return math.ceil(t - 1e-9)


def replay(
    instance: Instance,
    policy: ReplayPolicy = ReplayPolicy(),
    decide: Decide = decide_in_process,
    progress: Callable[[int, int], None] | None = None,
) -> Replay:
    """Replay one day; see the module docstring. decide : plans a round (in process by
    default; ``serve_app.ops.replay_client.ServedDecider`` sends it to a running app);
    progress(minute, last_minute) : called after every round."""
    return DaySimulator(instance, policy, decide).run(progress)
