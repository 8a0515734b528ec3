"""What a replayed round makes final: commit late, and bundle one restaurant's orders when it
pays. Policy objects the day's clock (``planner.mdrp.replay``) runs over a ``DayState``.

* **Commit late** (``LateCommitment``). A courier's most urgent planned order is committed
  only when the courier is free now and must leave within this round to reach the restaurant
  by the food's ready time (or the food is ready); with couriers short, ``short_commit_min``
  earlier (a courier held idle for a later order is re-planned round after round while orders
  queue; measured, 3 min pays, see docs/mdrp.md). Otherwise the order stays open: the next
  round may find a better courier (one finishing a drop-off nearby) or a bundle partner, and
  the courier stays free for other orders. No pickup after a courier's off time: such a
  courier is reported "late" and the round is planned again without it.
* **Bundle one restaurant's orders when it pays** (``RestaurantBundling``). A committed order
  takes along open orders of its restaurant whose food is ready by the pickup (plus
  ``wait_min``), one at a time, while the bundle gains: a mate joins when the minutes it
  gains (its drop-off in the bundle against its drop-off in the round's plan: the courier the
  plan gave it, or, unplanned, the earliest still possible plus ``UNPLANNED_MIN``), plus
  ``courier_worth_min`` when the round's plan leaves some order late (the courier the mate no
  longer needs is worth that much), exceed the minutes it adds to the bundle's orders, none of
  which it may delay by more than ``delay_min``. Drop-offs nearest first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from planner.mdrp.day import Bundle, CourierState, DayState, Move, Replay, minute
from planner.mdrp.instance import MdrpOrder, Restaurant

Outcome = Literal["committed", "held", "late"]


@dataclass(frozen=True)
class RestaurantBundling:
    """max_bundle : orders per bundle, at most; wait_min : how long past the planned pickup a
    mate's food may be ready; delay_min : how much a mate may delay each order of a bundle, at
    most; courier_worth_min : what a courier a bundle frees is worth, in minutes of
    click-to-door, in a round whose plan leaves some order late."""

    max_bundle: int
    wait_min: int
    delay_min: float
    courier_worth_min: float

    def bundle(
        self,
        day: DayState,
        first: MdrpOrder,
        rest: Restaurant,
        pickup: float,
        open_: dict[str, MdrpOrder],
    ) -> list[str]:
        """``first`` plus the open orders of its restaurant that pay for joining it, in
        drop-off order. pickup : the planned pickup minute of ``first``."""
        xy = (rest.x, rest.y)
        worth = self.courier_worth_min if day.plan_late else 0.0
        bundle = [first.id]
        mates = sorted(
            (
                o
                for o in open_.values()
                if o.restaurant == first.restaurant
                and o.id != first.id
                and o.ready <= pickup + self.wait_min
            ),
            key=lambda o: (o.placed, o.id),
        )
        for mate in mates:
            if len(bundle) >= self.max_bundle:
                break
            before = _drops(day, bundle, xy, pickup)
            trial = _drop_order(day, [*bundle, mate.id], xy)
            after = _drops(day, trial, xy, pickup)
            delays = [after[o] - before[o] for o in bundle]
            gain = day.drop_in_plan[mate.id] - after[mate.id]
            if max(delays) <= self.delay_min and sum(delays) < gain + worth:
                bundle = trial
        return bundle


@dataclass(frozen=True)
class LateCommitment:
    """round_min : minutes between rounds; short_commit_min : with couriers short, commit this
    much before the courier must leave; bundling : who a committed order takes along."""

    round_min: int
    short_commit_min: int
    bundling: RestaurantBundling

    def commit_plan(
        self,
        day: DayState,
        t: int,
        chosen: dict[str, str],
        open_: dict[str, MdrpOrder],
        out: Replay,
    ) -> set[str]:
        """Make final what ``chosen`` (order id -> courier id, already noted on ``day``)
        needs final at ``t``; the couriers whose pickup would fall after their shift."""
        planned: dict[str, list[MdrpOrder]] = {}
        for oid, cid in chosen.items():
            if oid in open_:
                planned.setdefault(cid, []).append(open_[oid])
        # Per courier, its most urgent order leads; the courier whose lead's food is ready
        # first commits (and bundles) first.
        leads = {cid: min(orders, key=lambda o: (o.ready, o.id)) for cid, orders in planned.items()}
        late: set[str] = set()
        for cid in sorted(leads, key=lambda c: (leads[c].ready, leads[c].id)):
            lead = leads[cid]
            if lead.id not in open_:  # taken along in an earlier bundle of this round
                continue
            if self.commit(day, t, lead, day.couriers[cid], open_, out) == "late":
                late.add(cid)
        return late

    def commit(
        self,
        day: DayState,
        t: int,
        order: MdrpOrder,
        state: CourierState,
        open_: dict[str, MdrpOrder],
        out: Replay,
    ) -> Outcome:
        """Commit ``order`` (and its bundle) to the courier of ``state`` if it must be final
        now: "committed", "held" (decide again next round) or "late" (after the shift)."""
        c = state.courier
        if state.free_at > t or c.on > t:
            return "held"  # the courier is not free yet: the order may wait for it
        rest = day.inst.restaurants[order.restaurant]
        to_rest = day.travel((state.x, state.y), (rest.x, rest.y))
        early = self.short_commit_min if day.short else 0
        if order.ready - to_rest - day.half_pickup > t + self.round_min - 1 + early:
            return "held"  # no need to leave yet
        arrive = t + to_rest
        pickup = max(order.ready, arrive + day.half_pickup)
        if pickup > c.off:
            return "late"
        bundle = self.bundling.bundle(day, order, rest, pickup, open_)
        if max(day.orders[o].ready for o in bundle) > c.off:  # a mate's food: after the shift
            bundle = [order.id]
        pickup = max([pickup] + [day.orders[o].ready for o in bundle])
        here, when, drops, moves = (rest.x, rest.y), pickup + day.half_pickup, [], []
        if state.place != rest.id:  # a prepositioned courier waits there already
            moves.append(Move(c.id, t, state.place, rest.id))
        place = rest.id
        for oid in bundle:
            o = day.orders[oid]
            moves.append(Move(c.id, minute(when), place, oid))
            arrive = when + day.travel(here, (o.x, o.y))
            drops.append(minute(arrive + day.half_dropoff))
            when, here, place = arrive + 2 * day.half_dropoff, (o.x, o.y), oid
            del open_[oid]
        out.moves.extend(moves)
        out.bundles.append(Bundle(t, c.id, rest.id, tuple(bundle), minute(pickup), tuple(drops)))
        state.place, (state.x, state.y), state.free_at = place, here, minute(when)
        return "committed"


def _drops(
    day: DayState, ids: list[str], start: tuple[float, float], pickup: float
) -> dict[str, float]:
    """Drop-off minute of each of ``ids`` (in that order) picked up together at ``start`` no
    earlier than ``pickup`` (and once every one's food is ready)."""
    when = max([pickup] + [day.orders[o].ready for o in ids]) + day.half_pickup
    here, out = start, {}
    for oid in ids:
        o = day.orders[oid]
        arrive = when + day.travel(here, (o.x, o.y))
        out[oid] = arrive + day.half_dropoff
        when, here = arrive + 2 * day.half_dropoff, (o.x, o.y)
    return out


def _drop_order(day: DayState, ids: list[str], start: tuple[float, float]) -> list[str]:
    """``ids`` nearest drop-off first, from ``start``."""
    left, order, here = list(ids), [], start
    while left:
        best = min(left, key=lambda o: (day.travel(here, (day.orders[o].x, day.orders[o].y)), o))
        order.append(best)
        left.remove(best)
        here = (day.orders[best].x, day.orders[best].y)
    return order
