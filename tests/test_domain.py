"""Domain types check themselves; the local projection's error is what the docs say."""

from __future__ import annotations

import math

import numpy as np
import pytest

from domain import (
    LatLng,
    LocalProjection,
    Order,
    OrderColumns,
    Rider,
    Route,
    Stop,
    StopKind,
    haversine_m,
)
from domain.types import DispatchRound, DispatchWeights


def order(oid: str = "o1", **kw) -> Order:
    base = dict(
        id=oid,
        pickup=LatLng(31.2, 121.4),
        dropoff=LatLng(31.21, 121.41),
        created_at=0.0,
        ready_at=300.0,
        promised_at=2000.0,
    )
    base.update(kw)
    return Order(**base)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"size": 0}, "size"),
        ({"promised_at": -1.0}, "promised_at"),
        ({"ready_at": math.nan}, "ready_at"),
        ({"pickup_service_s": -5.0}, "pickup_service_s"),
    ],
)
def test_order_rejects_bad_fields_by_name(kw, field):
    with pytest.raises(ValueError, match=field):
        order(**kw)


def test_latlng_range():
    with pytest.raises(ValueError, match="lat"):
        LatLng(91.0, 0.0)
    with pytest.raises(ValueError, match="lng"):
        LatLng(0.0, math.inf)


def test_rider_route_must_match_its_orders():
    o = order()
    ok = Rider(
        "r",
        LatLng(31.2, 121.4),
        5.0,
        3.0,
        Route((Stop("o1", StopKind.PICKUP), Stop("o1", StopKind.DROPOFF))),
        (o,),
    )
    assert ok.onboard_load == 0
    with pytest.raises(ValueError, match="must appear on the route"):
        Rider("r", LatLng(31.2, 121.4), 5.0, 3.0, Route((Stop("o1", StopKind.DROPOFF),)), (o,))
    picked = Rider(
        "r",
        LatLng(31.2, 121.4),
        5.0,
        3.0,
        Route((Stop("o1", StopKind.DROPOFF),)),
        (o,),
        frozenset({"o1"}),
    )
    assert picked.onboard_load == 1.0
    with pytest.raises(ValueError, match="exceeds capacity"):
        Rider(
            "r",
            LatLng(31.2, 121.4),
            5.0,
            0.5,
            Route((Stop("o1", StopKind.DROPOFF),)),
            (o,),
            frozenset({"o1"}),
        )


def test_round_rejects_duplicate_and_carried_orders():
    o = order()
    with pytest.raises(ValueError, match="unique"):
        DispatchRound(0.0, (), (o, o))
    rider = Rider(
        "r",
        LatLng(31.2, 121.4),
        5.0,
        3.0,
        Route((Stop("o1", StopKind.PICKUP), Stop("o1", StopKind.DROPOFF))),
        (o,),
    )
    with pytest.raises(ValueError, match="already on a rider"):
        DispatchRound(0.0, (rider,), (o,))
    with pytest.raises(ValueError, match="max_orders_per_rider"):
        DispatchWeights(max_orders_per_rider=0)


@pytest.mark.parametrize(("lat0", "bound"), [(0.0, 2e-3), (31.2, 2e-3), (45.0, 5e-3), (60.0, 5e-3)])
def test_projection_error_within_20_km_is_as_documented(lat0, bound):
    rng = np.random.default_rng(int(lat0))
    centre = LatLng(lat0, 10.0)
    proj = LocalProjection(centre)
    worst = 0.0
    for _ in range(300):
        pts = []
        for _ in range(2):
            r, a = 20_000 * math.sqrt(rng.random()), 2 * math.pi * rng.random()
            dlat = r * math.sin(a) / 111_195.0
            dlng = r * math.cos(a) / (111_195.0 * math.cos(math.radians(lat0)))
            pts.append(LatLng(lat0 + dlat, 10.0 + dlng))
        xy = proj.to_xy(np.array([p.lat for p in pts]), np.array([p.lng for p in pts]))
        planar = float(np.hypot(*(xy[0] - xy[1])))
        true = haversine_m(pts[0], pts[1])
        if true > 100:
            worst = max(worst, abs(planar - true) / true)
    assert worst < bound


def test_a_rider_slower_than_the_minimum_speed_is_refused():
    """1e-121 m/s is > 0 but rounds to 0 in float32: every travel time would be infinite."""
    from domain import MIN_SPEED_MPS

    with pytest.raises(ValueError, match=r"speed_mps must be >= 0\.1"):
        Rider("r", LatLng(31.2, 121.4), 1.7e-121, 3.0)
    assert Rider("r", LatLng(31.2, 121.4), MIN_SPEED_MPS, 3.0).speed_mps == MIN_SPEED_MPS


def test_numbers_the_kernels_cannot_hold_are_refused_naming_the_field():
    """A size or capacity float32 would round to nothing, and times so far from the round's
    now that float32 seconds lose them, are ValueErrors (a 422 at the edge), not plans that
    quietly mean something else."""
    from dataclasses import replace

    import pytest

    from domain import MAX_CLOCK_SPAN_S
    from planner import generate_round

    round_ = generate_round(2, 1, seed=1)
    order = round_.orders[0]
    with pytest.raises(ValueError, match="size must be >="):
        replace(order, size=1e-300)
    with pytest.raises(ValueError, match="capacity must be >="):
        replace(round_.riders[0], capacity=5e-324)
    far = replace(order, promised_at=round_.now + MAX_CLOCK_SPAN_S + 1)
    with pytest.raises(ValueError, match=f"order {order.id}: promised_at"):
        replace(round_, orders=(far,))
    with pytest.raises(ValueError, match="from the round's now"):
        replace(round_, now=0.0)  # every time near 1.77e9: unrepresentable against 0


def test_a_route_table_is_the_dict_of_its_routes_and_builds_them_when_asked():
    import pickle

    from domain import RouteTable

    table = RouteTable(["r1", "r2"], [0, 2, 3], ["a", "a", "b"], [True, False, False])
    want = {
        "r1": Route((Stop("a", StopKind.PICKUP), Stop("a", StopKind.DROPOFF))),
        "r2": Route((Stop("b", StopKind.DROPOFF),)),
    }
    assert table == want and list(table) == ["r1", "r2"] and len(table) == 2
    assert table["r1"] is table["r1"]  # built once
    assert pickle.loads(pickle.dumps(table)) == want
    assert list(table.stop_columns())[1] == ("r2", ["b"], [False])
    with pytest.raises(KeyError):
        table["r3"]
    with pytest.raises(ValueError, match="offset"):
        RouteTable(["r1"], [0], [], [])


@pytest.mark.parametrize(
    ("rule", "value", "holds"),
    [
        ("capacity", 1e-3, True),
        ("capacity", 1e-4, False),
        ("capacity", math.inf, False),
        ("capacity", math.nan, False),
        ("speed_mps", 50.0, True),
        ("available_at", -math.inf, False),
    ],
)
def test_a_rule_holds_for_one_value_as_for_a_column(rule, value, holds):

    from domain.rules import RIDER

    assert RIDER[rule].holds(value) is holds
    assert RIDER[rule].holds_all(np.array([1.0, value])) is (holds and RIDER[rule].holds(1.0))


def test_the_route_rule_names_the_stop_kinds():
    from domain import StopKind
    from domain.rules import ROUTE_STOPS

    assert {kind for stops in ROUTE_STOPS.values() for kind in stops} == {k.value for k in StopKind}


def test_orders_as_columns_hold_every_field_and_give_the_orders_back():
    from planner import generate_round

    orders = generate_round(0, 30, seed=3).orders
    orders += (Order("x", LatLng(1, 2), LatLng(3, 4), 5.0, 6.0, 7.0, 2.5, 3, 8.0, 9.0, (0, 4, 1)),)
    cols = OrderColumns.of(orders)
    assert len(cols) == 31 and cols.obeys_rules()
    assert cols.to_orders() == orders
    assert cols.times().tolist()[-1] == [5.0, 6.0, 7.0]
    assert cols.item_matrix(4)[-1].tolist() == [0.0, 4.0, 1.0, 0.0]
    assert OrderColumns.of(()).to_orders() == ()


def test_item_counts_past_64_bits_are_a_value_error_as_columns():
    order = Order("o", LatLng(0, 0), LatLng(0, 1), 0.0, 0.0, 1.0, item_counts=(2**70,))
    with pytest.raises(ValueError, match="64 bits"):
        OrderColumns.of([order])
