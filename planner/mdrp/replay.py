"""A day of MDRP dispatch, replayed round by round through our dispatch (``dispatch_round``).

Discrete time in the instance's integer minutes. Every ``round_min`` minutes the orders placed
and not yet committed, and the couriers that are (or soon will be) on shift with time left to
pick up, become a ``DispatchRound``: a courier is a rider at the place and time it will be free
(MDRP couriers cannot be diverted, so only their last drop-off and its time matter); an order
is due at the earliest drop-off still possible (a courier waiting at the restaurant when the
food is ready, or leaving now if that has passed), so the dispatch prices each assignment by
the minutes of click-to-door it adds (``late_weight`` minutes of driving each). Up to
``max_bundle`` orders per courier per plan; the MDRP's one-restaurant bundles are formed at
commitment.

What a decision becomes is ``ReplayPolicy``'s, and only what must be final now is made final:

* **Commit late.** A courier's most urgent planned order is committed only when the courier
  is free now and must leave within this round to reach the restaurant by the food's ready
  time (or the food is ready). Otherwise the order stays open: the next round may find a
  better courier (one finishing a drop-off nearby) or a bundle partner, and the courier stays
  free for other orders.
* **Bundle one restaurant's orders.** A committed order takes along open orders of its
  restaurant whose food is ready by the pickup (plus ``bundle_wait_min``) and that the round
  did not plan for another courier, as long as every order in the bundle still arrives within
  the target click-to-door. When couriers are short (more open orders than free couriers) a
  bundle also takes orders planned for others, and may delay its orders by up to
  ``bundle_delay_min`` each: a mate served now beats one waiting for a courier. Drop-offs
  nearest first.
* **Shifts.** No pickup after a courier's off time: a courier is offered only while
  ``shift_margin_min`` is left, and one whose pickup would fall after its off time is left
  out and the round planned again without it.
* **Sunk lateness.** Each round re-bases an order's due time on what is still possible, so an
  order that has waited costs no more to assign than a fresh one (priced against its original
  promise, a waiting order is the dearest to assign, and with couriers short the assignment
  would leave it out round after round).

Travel in the decisions is the dispatch model's (straight line at the instance's speed); the
simulation itself uses MDRP's exact rule (ceil of distance / speed, whole minutes). The ETR
model is not used (``etr_floor`` off): in MDRP the delivery time is the schedule's, known
exactly, and the model was trained on another market's deliveries.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from domain import DispatchRound, DispatchWeights, LatLng, Order, Rider
from domain.geo import EARTH_RADIUS_M
from planner.dispatch_round import dispatch_round
from planner.mdrp.instance import Courier, Instance, MdrpOrder, Restaurant

_DEG_PER_M = 180.0 / (math.pi * EARTH_RADIUS_M)
SHIFT_RETRIES = 3
MAX_LATENESS_S = 86_400.0  # no hard limit within a day (and what the served API accepts)


def _latlng(x: float, y: float) -> LatLng:
    # MDRP positions are metres on a plane; about (0, 0) the round's local projection maps these
    # degrees back to the same metres (to ~1e-5 relative), so distances are the instance's.
    return LatLng(y * _DEG_PER_M, x * _DEG_PER_M)


@dataclass(frozen=True)
class ReplayPolicy:
    """round_min : minutes between rounds; late_weight : minutes of driving one minute of
    added click-to-door is worth; max_bundle : orders per bundle (and planned per courier), at
    most; bundle_wait_min : how long past the planned pickup a mate's food may be ready;
    bundle_delay_min : with couriers short, how much a mate may delay each order of a bundle;
    shift_margin_min : a courier is offered only with this long left before its off time;
    lookahead_min : a courier coming on shift this soon is offered already (it can be held
    for); candidate_riders : each order priced against its nearest K couriers (None: all);
    rebase_promise : due times re-based each round (see the module docstring)."""

    round_min: int = 1
    late_weight: float = 4.0
    max_bundle: int = 3
    bundle_wait_min: int = 5
    shift_margin_min: int = 5
    lookahead_min: int = 10
    candidate_riders: int | None = 48
    rebase_promise: bool = True
    bundle_delay_min: float = 10.0

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
        self._short = False  # this round has more open orders than free couriers

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

    def _due_now(self, order: Order, t: int) -> Order:
        """The order as round ``t`` prices it: due at the earliest drop-off still possible.

        Lateness already built up is sunk: priced against the original promise, an order that
        has waited would cost more to assign than a fresh one whatever courier takes it, and
        with couriers short (the assignment leaves the dearest orders out) it would keep
        waiting: starvation. Re-based, every order is priced by the delay a courier adds."""
        if not self.policy.rebase_promise:
            return order
        ride = order.promised_at - order.ready_at  # pickup service + ride + half a drop-off
        due = max(order.promised_at, t * 60.0 + ride)
        return order if due == order.promised_at else replace(order, promised_at=due)

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
        # The dispatch does not know shift ends: a courier it picks that would reach the
        # restaurant after its off time is left out and the round planned again without it
        # (else the order would be held for that courier round after round).
        excluded: set[str] = set()
        for _ in range(SHIFT_RETRIES):
            riders = [r for r in self._riders(t) if r.id not in excluded]
            if not riders or not open_:
                return
            late = self._plan_and_commit(t, riders, open_, out)
            if not late:
                return
            excluded |= late

    def _plan_and_commit(
        self, t: int, riders: list[Rider], open_: dict[str, MdrpOrder], out: Replay
    ) -> set[str]:
        """One plan of round ``t``; commits what must be final now. Returns the couriers whose
        pickup would fall after their shift."""
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
            orders=tuple(self._due_now(self._domain_orders[oid], t) for oid in open_),
            weights=weights,
        )
        t0 = time.perf_counter()
        chosen = self.decide(round_)
        out.dispatch_ms += (time.perf_counter() - t0) * 1e3
        out.plans += 1
        planned: dict[str, list[MdrpOrder]] = {}
        for oid, cid in chosen.items():
            if oid in open_:
                planned.setdefault(cid, []).append(open_[oid])
        # Per courier, its most urgent order leads; the courier whose lead's food is ready
        # first commits (and bundles) first.
        leads = {cid: min(orders, key=lambda o: (o.ready, o.id)) for cid, orders in planned.items()}
        late: set[str] = set()
        self._short = len(open_) > sum(r.available_at is None for r in riders)
        for cid in sorted(leads, key=lambda c: (leads[c].ready, leads[c].id)):
            lead = leads[cid]
            if lead.id not in open_:  # taken along in an earlier bundle of this round
                continue
            if self._maybe_commit(t, lead, self.couriers[cid], open_, out, chosen) == "late":
                late.add(cid)
        return late

    def _maybe_commit(
        self,
        t: int,
        order: MdrpOrder,
        state: CourierState,
        open_: dict[str, MdrpOrder],
        out: Replay,
        chosen: dict[str, str],
    ) -> str:
        """ "committed", "held" (decide again next round) or "late" (after the shift's end)."""
        c = state.courier
        if state.free_at > t or c.on > t:
            return "held"  # the courier is not free yet: the order may wait for it
        rest = self.inst.restaurants[order.restaurant]
        to_rest = self.travel((state.x, state.y), (rest.x, rest.y))
        if order.ready - to_rest - self.half_pickup > t + self.policy.round_min - 1:
            return "held"  # no need to leave yet
        arrive = t + to_rest
        pickup = max(order.ready, arrive + self.half_pickup)
        if pickup > c.off:
            return "late"
        bundle = self._bundle(order, rest, pickup, open_, chosen)
        if max(self.orders[o].ready for o in bundle) > c.off:  # a mate's food: after the shift
            bundle = [order.id]
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
        out.bundles.append(Bundle(t, c.id, rest.id, tuple(bundle), _minute(pickup), tuple(drops)))
        state.place, (state.x, state.y), state.free_at = place, here, _minute(when)
        return "committed"

    def _bundle(
        self,
        first: MdrpOrder,
        rest: Restaurant,
        pickup: float,
        open_: dict[str, MdrpOrder],
        chosen: dict[str, str],
    ) -> list[str]:
        """``first`` plus open orders of its restaurant that fit (see the module's rules) and
        that the round did not plan for another courier (``chosen``: order id -> courier)."""
        target = self.inst.params.target_click_to_door
        bundle, courier = [first.id], chosen[first.id]
        mates = sorted(
            (
                o
                for o in open_.values()
                if o.restaurant == first.restaurant
                and o.id != first.id
                and (self._short or chosen.get(o.id, courier) == courier)
                and o.ready <= pickup + self.policy.bundle_wait_min
            ),
            key=lambda o: (o.placed, o.id),
        )
        for mate in mates:
            if len(bundle) >= self.policy.max_bundle:
                break
            trial = self._drop_order([*bundle, mate.id], (rest.x, rest.y))
            start = max([pickup] + [self.orders[o].ready for o in trial])
            times = self._click_to_door(trial, (rest.x, rest.y), start)
            if all(c2d <= target for c2d in times) or (
                self._short and self._delays_at_most(bundle, trial, times, pickup, rest)
            ):
                bundle = trial
        return self._drop_order(bundle, (rest.x, rest.y))

    def _delays_at_most(
        self,
        bundle: list[str],
        trial: list[str],
        times: list[float],
        pickup: float,
        rest: Restaurant,
    ) -> bool:
        """Whether ``trial`` (``bundle`` plus a mate) delays no order of ``bundle`` by more than
        ``bundle_delay_min`` (couriers short: a mate served now beats one waiting for a courier)."""
        start = max([pickup] + [self.orders[o].ready for o in bundle])
        before = dict(
            zip(bundle, self._click_to_door(bundle, (rest.x, rest.y), start), strict=True)
        )
        after = dict(zip(trial, times, strict=True))
        return all(after[o] - before[o] <= self.policy.bundle_delay_min for o in bundle)

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
    default; ``ops.replay_client.ServedDecider`` sends it to a running app);
    progress(minute, last_minute) : called after every round."""
    return DaySimulator(instance, policy, decide).run(progress)
