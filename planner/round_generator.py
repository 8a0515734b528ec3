"""A seeded, realistic dispatch round for tests, benchmarks and examples.

The city: a disc of ``city_radius_m`` about ``centre``. Restaurants cluster around a few food
districts (Gaussian, 400 m spread); customers spread uniformly over the disc. Riders ride e-bikes
(4-6 m/s) with boxes of 4-6 units and are already carrying some orders: each current route is a
nearest-neighbour tour over its orders' stops (pickups before their drop-offs), some orders
already picked up, their promises consistent with the route (``_consistent_times``). New
orders are promised 30-45 minutes after creation, food is ready 5-15 minutes after creation,
each stop takes a minute of service.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from domain import (
    DispatchRound,
    DispatchWeights,
    LatLng,
    Order,
    Rider,
    Route,
    Stop,
    StopKind,
)
from domain.geo import EARTH_RADIUS_M, haversine_m

DEFAULT_CENTRE = LatLng(31.2304, 121.4737)
_DEG_PER_M = 180.0 / (math.pi * EARTH_RADIUS_M)


class _City:
    def __init__(self, rng: np.random.Generator, centre: LatLng, radius_m: float, districts: int):
        self.rng, self.centre, self.radius_m = rng, centre, radius_m
        self.districts = [self.uniform() for _ in range(districts)]

    def offset(self, origin: LatLng, east_m: float, north_m: float) -> LatLng:
        lat = origin.lat + north_m * _DEG_PER_M
        lng = origin.lng + east_m * _DEG_PER_M / math.cos(math.radians(origin.lat))
        return LatLng(lat, lng)

    def uniform(self) -> LatLng:
        r = self.radius_m * math.sqrt(self.rng.random())
        a = 2 * math.pi * self.rng.random()
        return self.offset(self.centre, r * math.cos(a), r * math.sin(a))

    def restaurant(self) -> LatLng:
        d = self.districts[int(self.rng.integers(len(self.districts)))]
        e, n = self.rng.normal(0.0, 400.0, 2)
        return self.offset(d, float(e), float(n))


def _order(city: _City, oid: str, now: float, age_s: float, delivery_radius_m: float) -> Order:
    rng = city.rng
    created = now - age_s
    pickup = city.restaurant()
    r = delivery_radius_m * math.sqrt(rng.random())
    a = 2 * math.pi * rng.random()
    return Order(
        id=oid,
        pickup=pickup,
        dropoff=city.offset(pickup, r * math.cos(a), r * math.sin(a)),
        created_at=created,
        ready_at=created + float(rng.uniform(300, 900)),
        promised_at=created + float(rng.uniform(1800, 2700)),
        size=1.0,
        items=int(rng.integers(1, 6)),
        pickup_service_s=60.0,
        dropoff_service_s=60.0,
    )


def _nearest_neighbour_route(
    start: LatLng, orders: list[Order], picked: set[str]
) -> tuple[Stop, ...]:
    """A plausible committed route: always drive to the nearest stop that precedence allows."""

    def dist2(a: LatLng, b: LatLng) -> float:
        dx = (a.lng - b.lng) * math.cos(math.radians(a.lat))
        return dx * dx + (a.lat - b.lat) ** 2

    open_pick = {o.id: o for o in orders if o.id not in picked}
    open_drop = {o.id: o for o in orders if o.id in picked}
    here, stops = start, []
    while open_pick or open_drop:
        cands = [(dist2(here, o.pickup), o.id, StopKind.PICKUP) for o in open_pick.values()]
        cands += [(dist2(here, o.dropoff), o.id, StopKind.DROPOFF) for o in open_drop.values()]
        _, oid, kind = min(cands)
        if kind is StopKind.PICKUP:
            order = open_pick.pop(oid)
            open_drop[oid] = order
            here = order.pickup
        else:
            here = open_drop.pop(oid).dropoff
        stops.append(Stop(oid, kind))
    return tuple(stops)


def _consistent_times(
    rng: np.random.Generator,
    now: float,
    start: LatLng,
    speed: float,
    stops: tuple[Stop, ...],
    orders: list[Order],
    picked: set[str],
) -> list[Order]:
    """Re-time a committed route's orders the way an earlier round would have promised them:
    each drop-off promised 5 minutes before to 15 minutes after its planned arrival (so a few
    riders run late), created 30-45 minutes before the promise, the food ready 5-15 minutes after
    creation but by the time the rider gets there (up to 2 minutes after)."""
    by_id = {o.id: o for o in orders}
    t, here = now, start
    arrive: dict[tuple[str, StopKind], float] = {}
    for stop in stops:
        o = by_id[stop.order_id]
        to = o.pickup if stop.kind is StopKind.PICKUP else o.dropoff
        t += haversine_m(here, to) / speed
        arrive[(o.id, stop.kind)] = t
        t += 60.0
        here = to
    out = []
    for o in orders:
        promised = arrive[(o.id, StopKind.DROPOFF)] + float(rng.uniform(-300, 900))
        created = min(promised - float(rng.uniform(1800, 2700)), now - float(rng.uniform(0, 60)))
        ready = created + float(rng.uniform(300, 900))
        if o.id in picked:
            ready = min(ready, now - 60.0)
        else:
            ready = min(ready, arrive[(o.id, StopKind.PICKUP)] + float(rng.uniform(-60, 120)))
        promised = max(promised, created + 1800.0)
        out.append(
            replace(o, created_at=created, ready_at=max(ready, created), promised_at=promised)
        )
    return out


def generate_round(
    n_riders: int,
    n_orders: int,
    *,
    seed: int = 0,
    route_stops: tuple[int, int] = (0, 12),
    now: float = 1_767_225_600.0,
    centre: LatLng = DEFAULT_CENTRE,
    city_radius_m: float = 8000.0,
    districts: int = 12,
    delivery_radius_m: float = 3500.0,
    weights: DispatchWeights | None = None,
) -> DispatchRound:
    """A round of ``n_riders`` riders (routes of ``route_stops`` stops, inclusive) and
    ``n_orders`` new orders, the same for the same arguments.

    Raises ValueError on negative counts or an empty/negative ``route_stops`` range.
    """
    if n_riders < 0 or n_orders < 0:
        raise ValueError("n_riders and n_orders must be >= 0")
    lo, hi = route_stops
    if not 0 <= lo <= hi:
        raise ValueError(f"route_stops must be 0 <= lo <= hi, got {route_stops}")
    rng = np.random.default_rng(seed)
    city = _City(rng, centre, city_radius_m, districts)
    riders = []
    for r in range(n_riders):
        capacity = float(rng.integers(4, 7))
        target = int(rng.integers(lo, hi + 1))
        # target stops = 2 x (orders to pick up) + (orders on board)
        n_carried = min(int(capacity), math.ceil(target / 2))
        n_on_board = max(0, 2 * n_carried - target)
        carried = [
            _order(city, f"r{r}-o{k}", now, 0.0, delivery_radius_m) for k in range(n_carried)
        ]
        picked = {o.id for o in carried[:n_on_board]}
        position = city.restaurant() if rng.random() < 0.5 else city.uniform()
        speed = float(rng.uniform(4.0, 6.0))
        stops = _nearest_neighbour_route(position, carried, picked)
        carried = _consistent_times(rng, now, position, speed, stops, carried, picked)
        riders.append(
            Rider(
                id=f"rider-{r}",
                position=position,
                speed_mps=speed,
                capacity=capacity,
                route=Route(stops),
                orders=tuple(carried),
                picked_up=frozenset(picked),
            )
        )
    orders = tuple(
        _order(city, f"order-{k}", now, float(rng.uniform(0, 120)), delivery_radius_m)
        for k in range(n_orders)
    )
    return DispatchRound(
        now=now, riders=tuple(riders), orders=orders, weights=weights or DispatchWeights()
    )
