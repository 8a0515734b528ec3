"""Riders as columns: packed like domain riders, and never passed where the domain refuses.

``obeys_domain_rules`` lets the served path skip building domain objects, so it must refuse
every round a ``DispatchRound`` refuses. Each test breaks one rule on plain objects that have
the domain types' field names (as the request's wire Structs do) and asks both."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain import DispatchRound, LatLng, Order, OrderColumns, Rider, Route, Stop, StopKind
from domain.types import MAX_CLOCK_SPAN_S
from planner import generate_round, pack_round
from planner.rider_columns import obeys_domain_rules, rider_columns
from planner.round_to_arrays import pack_columns

ROUND = generate_round(12, 4, seed=11, route_stops=(1, 9))


def plain(x):
    """A domain value as plain objects with its field names (lists where it holds tuples)."""
    if isinstance(x, (LatLng, Order, Rider, Stop)):
        fields = {k: plain(getattr(x, k)) for k in x.__slots__}
        return SimpleNamespace(**fields)
    if isinstance(x, Route):
        return [plain(s) for s in x.stops]
    if isinstance(x, (tuple, frozenset)):
        return [plain(v) for v in x]
    return x


def domain_order(o) -> Order:
    return Order(
        o.id,
        LatLng(o.pickup.lat, o.pickup.lng),
        LatLng(o.dropoff.lat, o.dropoff.lng),
        o.created_at,
        o.ready_at,
        o.promised_at,
        o.size,
        o.items,
        o.pickup_service_s,
        o.dropoff_service_s,
        tuple(o.item_counts),
    )


def domain_rider(r) -> Rider:
    return Rider(
        r.id,
        LatLng(r.position.lat, r.position.lng),
        r.speed_mps,
        r.capacity,
        Route(tuple(Stop(s.order_id, s.kind) for s in r.route)),
        tuple(domain_order(o) for o in r.orders),
        frozenset(r.picked_up),
        r.available_at,
    )


def domain_accepts(now: float, riders: list, orders: list | None = None) -> bool:
    new = ROUND.orders if orders is None else orders
    try:
        DispatchRound(
            now, tuple(domain_rider(r) for r in riders), tuple(domain_order(o) for o in new)
        )
    except ValueError:
        return False
    return True


def columns_accept(now: float, riders: list, orders: list | None = None) -> bool:
    new = OrderColumns.of(ROUND.orders if orders is None else orders)
    return obeys_domain_rules(rider_columns(riders), now, new)


def riders_with_picked_up() -> list:
    riders = plain(ROUND.riders)
    assert any(r.picked_up for r in riders) and any(len(r.route) >= 2 for r in riders)
    return riders


def test_a_valid_round_passes_and_packs_as_its_domain_round():
    riders = plain(ROUND.riders)
    assert domain_accepts(ROUND.now, riders) and columns_accept(ROUND.now, riders)
    got = pack_columns(ROUND.now, rider_columns(riders), OrderColumns.of(ROUND.orders), 1800.0)
    want = pack_round(ROUND)
    for batch in ("routes", "orders"):
        for name, a in vars(getattr(want, batch)).items():
            if isinstance(a, np.ndarray):
                assert np.array_equal(getattr(getattr(got, batch), name), a, equal_nan=True)
    assert np.array_equal(got.owner, want.owner)
    assert (got.rider_ids, got.order_ids) == (want.rider_ids, want.order_ids)


def _first(riders, want_picked: bool | None = None):
    """The first rider with a route (and, when asked, with or without picked-up orders)."""
    for r in riders:
        if r.route and (want_picked is None or bool(r.picked_up) == want_picked):
            return r
    raise AssertionError("no such rider in ROUND")


def _not_picked(rider):
    return next(o for o in rider.orders if o.id not in rider.picked_up)


def _break(rule: str, riders: list, orders: list) -> float:
    """Break ``rule`` in ``riders`` or the new ``orders`` (in place); returns the round's
    now."""
    now = ROUND.now
    r = _first(riders)
    new = orders[0]
    other = next(x for x in riders if x is not r and x.orders)
    if rule == "duplicate rider id":
        other.id = r.id
    elif rule == "empty rider id":
        r.id = ""
    elif rule == "order on two riders":  # both routes whole: only the round's rule breaks
        r = _first(riders, want_picked=False)
        other = next(x for x in riders if x is not r)
        o = copy.deepcopy(r.orders[0])
        other.orders.append(o)
        other.route.extend(SimpleNamespace(order_id=o.id, kind=k) for k in StopKind)
    elif rule == "same order twice on a rider":
        r.orders.append(copy.deepcopy(r.orders[0]))
    elif rule == "new order on a route":
        old = r.orders[0].id
        r.orders[0].id = ROUND.orders[0].id
        for s in r.route:
            if s.order_id == old:
                s.order_id = ROUND.orders[0].id
        r.picked_up = [ROUND.orders[0].id if p == old else p for p in r.picked_up]
    elif rule == "stop for an unknown order":
        r.route[0].order_id = "nobody-carries-this"
    elif rule == "stop for another rider's order":
        r.route[0].order_id = other.orders[0].id
    elif rule == "missing drop-off":
        r = _first(riders, want_picked=False)
        r.route[:] = [s for s in r.route if s.kind is StopKind.PICKUP]
    elif rule == "missing pickup":
        r = _first(riders, want_picked=False)
        oid = _not_picked(r).id
        r.route[:] = [s for s in r.route if not (s.order_id == oid and s.kind is StopKind.PICKUP)]
    elif rule == "drop-off before pickup":
        r = _first(riders, want_picked=False)
        oid = _not_picked(r).id
        for s in r.route:
            if s.order_id == oid:
                s.kind = StopKind.DROPOFF if s.kind is StopKind.PICKUP else StopKind.PICKUP
    elif rule == "picked-up order still to pick up":
        r = _first(riders, want_picked=True)
        oid = next(iter(r.picked_up))
        r.route.insert(0, SimpleNamespace(order_id=oid, kind=StopKind.PICKUP))
    elif rule == "picked_up names an unknown order":
        r.picked_up.append("nobody-carries-this")
    elif rule == "picked_up names another rider's order":
        r.picked_up.append(other.orders[0].id)
    elif rule == "load over capacity":
        r = _first(riders, want_picked=True)
        r.capacity = sum(o.size for o in r.orders if o.id in r.picked_up) - 0.5
    elif rule == "promise before creation":
        r.orders[0].promised_at = r.orders[0].created_at - 1.0
    elif rule == "order time far from now":
        r.orders[0].ready_at = now + MAX_CLOCK_SPAN_S + 1.0
    elif rule == "available_at far from now":
        r.available_at = now - MAX_CLOCK_SPAN_S - 1.0
    elif rule == "available_at not a number":
        r.available_at = float("nan")
    elif rule == "now not finite":
        now = float("inf")
    elif rule == "speed below the least":
        r.speed_mps = 0.01
    elif rule == "capacity below the least":
        r.capacity = 0.0
    elif rule == "size below the least":
        r.orders[0].size = 0.0
    elif rule == "negative service time":
        r.orders[0].dropoff_service_s = -1.0
    elif rule == "latitude out of range":
        r.orders[0].dropoff.lat = 91.0
    elif rule == "position not finite":
        r.position.lng = float("nan")
    elif rule == "speed not finite":
        r.speed_mps = float("inf")
    elif rule == "capacity not finite":
        r.capacity = float("inf")
    elif rule == "size not finite":
        r.orders[0].size = float("inf")
    elif rule == "service time not finite":
        r.orders[0].pickup_service_s = float("inf")
    elif rule == "new order: empty id":
        new.id = ""
    elif rule == "new order: id repeated":
        orders[1].id = new.id
    elif rule == "new order: promise before creation":
        new.promised_at = new.created_at - 1.0
    elif rule == "new order: time far from now":
        new.ready_at = now + MAX_CLOCK_SPAN_S + 1.0
    elif rule == "new order: time not finite":
        new.created_at = float("nan")
    elif rule == "new order: size below the least":
        new.size = 0.0
    elif rule == "new order: service time not finite":
        new.dropoff_service_s = float("inf")
    elif rule == "new order: longitude out of range":
        new.pickup.lng = -181.0
    elif rule == "new order: items below 0":
        new.items = -1
    elif rule == "new order: an item count below 0":
        new.item_counts = [1, -1]
    else:
        raise AssertionError(rule)
    return now


RULES = [
    "duplicate rider id",
    "empty rider id",
    "order on two riders",
    "same order twice on a rider",
    "new order on a route",
    "stop for an unknown order",
    "stop for another rider's order",
    "missing drop-off",
    "missing pickup",
    "drop-off before pickup",
    "picked-up order still to pick up",
    "picked_up names an unknown order",
    "picked_up names another rider's order",
    "load over capacity",
    "promise before creation",
    "order time far from now",
    "available_at far from now",
    "available_at not a number",
    "now not finite",
    "speed below the least",
    "capacity below the least",
    "size below the least",
    "negative service time",
    "latitude out of range",
    "position not finite",
    "speed not finite",
    "capacity not finite",
    "size not finite",
    "service time not finite",
    "new order: empty id",
    "new order: id repeated",
    "new order: promise before creation",
    "new order: time far from now",
    "new order: time not finite",
    "new order: size below the least",
    "new order: service time not finite",
    "new order: longitude out of range",
    "new order: items below 0",
    "new order: an item count below 0",
]


@pytest.mark.parametrize("rule", RULES)
def test_a_broken_rule_is_refused_by_both(rule):
    riders, orders = riders_with_picked_up(), plain(ROUND.orders)
    now = _break(rule, riders, orders)
    assert not domain_accepts(now, riders, orders), f"{rule}: the domain took it (wrong test)"
    assert not columns_accept(now, riders, orders), rule


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, 4),  # the edit's kind
            st.integers(0, 10**6),  # its target
            st.integers(0, 10**6),  # what it takes from
            st.sampled_from([math.inf, -math.inf, math.nan, 0.0, -1.0, 1e308]),
        ),
        max_size=3,
    )
)
def test_random_edits_never_pass_the_columns_where_the_domain_refuses(edits):
    """Swap ids, kinds and numbers between random places, or set a number to a drawn value
    (non-finite among them): whatever the columns pass, the domain types take too."""
    riders, new = riders_with_picked_up(), plain(ROUND.orders)
    stops = [s for r in riders for s in r.route]
    orders = [o for r in riders for o in r.orders]
    order_numbers = ("created_at", "promised_at", "size", "pickup_service_s", "dropoff_service_s")
    numbers = [(o, k) for o in [*orders, *new] for k in order_numbers]
    numbers += [(r, k) for r in riders for k in ("capacity", "available_at", "speed_mps")]
    for kind, a, b, value in edits:
        if kind == 4:  # a number becomes the drawn value
            obj, name = numbers[a % len(numbers)]
            setattr(obj, name, value)
        elif kind == 0:  # a stop names another order
            stops[a % len(stops)].order_id = orders[b % len(orders)].id
        elif kind == 1:  # a stop changes kind
            s = stops[b % len(stops)]
            s.kind = StopKind.DROPOFF if s.kind is StopKind.PICKUP else StopKind.PICKUP
        elif kind == 2:  # a picked_up list gains or loses a name
            r = riders[a % len(riders)]
            r.picked_up = r.picked_up[1:] if b % 2 else [*r.picked_up, orders[b % len(orders)].id]
        else:  # a number moves to another place
            obj, name = numbers[b % len(numbers)]
            value = getattr(*numbers[a % len(numbers)])
            setattr(obj, name, ROUND.now if value is None else value)
    if columns_accept(ROUND.now, riders, new):
        assert domain_accepts(ROUND.now, riders, new)


def test_every_number_rule_of_the_domain_binds_its_column():
    """The rules of ``domain.rules`` are read by the columns' check by field name: a rule for a
    field the columns keep cannot be left out of it."""
    from domain import order_columns as oc
    from domain import rules
    from planner import rider_columns as rc

    head = {rc.HEAD_FIELDS[i] for i, _ in rc._HEAD_RULES}
    assert head | {"available_at"} == set(rc.HEAD_FIELDS)  # available_at: the clock span
    assert set(rules.RIDER) <= set(rc.HEAD_FIELDS)
    assert set(rules.POSITION) <= head
    assert set(rules.ORDER) <= set(oc.ORDER_FIELDS) and rc.CARRIED_FIELDS == oc.ORDER_FIELDS
    assert len(oc.COLUMN_RULES) == len(oc.ORDER_FIELDS)
