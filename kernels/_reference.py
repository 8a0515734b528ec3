"""Slow, obvious float64 reference of the kernels, for tests and the benchmark baseline only.

Every placement is priced by simulating the whole new route, with the same rules as the fast
kernels (``kernels.insertion_costs`` module doc): a stop's hard deadline binds only if the stop
gets later than it already was; capacity binds on the legs that carry the new order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kernels.arrays import OrderArrays, RouteArrays
from kernels.insertion_types import Insertions


@dataclass(frozen=True)
class _Stop:
    x: float
    y: float
    ready: float
    due: float
    latest: float
    service: float
    load: float
    new: bool = False


def _route(routes: RouteArrays, r: int) -> list[_Stop]:
    return [
        _Stop(
            float(routes.stop_xy[r, q, 0]),
            float(routes.stop_xy[r, q, 1]),
            float(routes.stop_ready[r, q]),
            float(routes.stop_due[r, q]),
            float(routes.stop_latest[r, q]),
            float(routes.stop_service[r, q]),
            float(routes.stop_load[r, q]),
        )
        for q in range(int(routes.n_stops[r]))
    ]


def simulate(routes: RouteArrays, r: int, stops: list[_Stop]) -> tuple[list[float], float, float]:
    """(arrival per stop, driving time, summed lateness) of route r driven along ``stops``."""
    x, y = float(routes.start_xy[r, 0]), float(routes.start_xy[r, 1])
    t, speed = float(routes.start_time[r]), float(routes.speed[r])
    arrivals, travel, late = [], 0.0, 0.0
    for s in stops:
        leg = math.hypot(s.x - x, s.y - y) / speed
        travel += leg
        t += leg
        arrivals.append(t)
        if math.isfinite(s.due):
            late += max(0.0, t - s.due)
        t = max(t, s.ready) + s.service
        x, y = s.x, s.y
    return arrivals, travel, late


#: Seconds by which a stop must pass its hard deadline, and get later than it was, to break
#: it. The kernels compute in float32, whose resolution at t ~ 3000 s is 2.4e-4 s: a stop
#: the exact arithmetic makes 1.5e-5 s later (a drop-off lying on a leg) they may see as not
#: later at all. Tests pass a positive and a negative ``tol`` to find such borderline pairs.
LATER_TOL_S = 1e-6


def placement(
    routes: RouteArrays,
    orders: OrderArrays,
    r: int,
    o: int,
    i: int,
    j: int,
    late_weight: float,
    tol: float = LATER_TOL_S,
) -> tuple[float, float, float, float]:
    """(cost, added travel, added lateness, arrival at the new drop-off) of one placement;
    ``tol`` as ``LATER_TOL_S``."""
    base = _route(routes, r)
    has_p = bool(orders.has_pickup[o])
    if not has_p and i != 0:
        return math.inf, 0.0, 0.0, 0.0
    size = float(orders.size[o])
    p = _Stop(
        float(orders.pickup_xy[o, 0]),
        float(orders.pickup_xy[o, 1]),
        float(orders.ready[o]),
        math.inf,
        float(orders.pickup_latest[o]),
        float(orders.pickup_service[o]),
        size,
        True,
    )
    d = _Stop(
        float(orders.dropoff_xy[o, 0]),
        float(orders.dropoff_xy[o, 1]),
        float(orders.dropoff_ready[o]),
        float(orders.due[o]),
        float(orders.dropoff_latest[o]),
        float(orders.dropoff_service[o]),
        -size,
        True,
    )
    new = base[:i] + ([p] if has_p else []) + base[i:j] + [d] + base[j:]
    old_arr, old_travel, old_late = simulate(routes, r, base)
    new_arr, new_travel, new_late = simulate(routes, r, new)
    old_at = iter(old_arr)
    for s, t in zip(new, new_arr, strict=True):
        before = -math.inf if s.new else next(old_at)
        if t > s.latest + tol and t > before + tol:
            return math.inf, 0.0, 0.0, 0.0
    if has_p:
        load = float(routes.load0[r])
        carrying = False
        for s in new:
            load += s.load
            if s is p:
                carrying = True
            if s is d:
                break
            if carrying and load > float(routes.capacity[r]) + 1e-9:
                return math.inf, 0.0, 0.0, 0.0
    travel, late = new_travel - old_travel, new_late - old_late
    return travel + late_weight * late, travel, late, new_arr[new.index(d)]


def reference_insertion_costs(
    routes: RouteArrays,
    orders: OrderArrays,
    *,
    late_weight: float,
    pairs: bool = False,
    tol: float = LATER_TOL_S,
) -> Insertions:
    """Brute force over every placement; NumPy inputs; same shapes as ``insertion_costs``;
    ``tol`` as ``LATER_TOL_S``."""
    n_routes = routes.shape[0]
    n_orders = len(orders)
    shape = (n_routes,) if pairs else (n_routes, n_orders)
    cost = np.full(shape, np.inf)
    pi = np.full(shape, -1, np.int32)
    pj = np.full(shape, -1, np.int32)
    travel = np.zeros(shape)
    late = np.zeros(shape)
    arrival = np.zeros(shape)
    for r in range(n_routes):
        limit = int(routes.insert_limit[r])
        for o in [r] if pairs else range(n_orders):
            key = (r,) if pairs else (r, o)
            for i in range(limit + 1):
                for j in range(i, limit + 1):
                    c, tr, la, arr = placement(routes, orders, r, o, i, j, late_weight, tol)
                    if c < cost[key]:
                        cost[key], pi[key], pj[key] = c, i, j
                        travel[key], late[key], arrival[key] = tr, la, arr
    return Insertions(cost, pi, pj, travel, late, arrival)
