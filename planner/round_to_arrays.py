"""Packing a ``DispatchRound`` into the kernels' arrays, once per round.

Times become float32 seconds since ``round.now`` (absolute epoch seconds would lose whole seconds
in float32); positions become planar metres in the round's local projection (``domain.geo``).
The dispatch rules land in the arrays here and nowhere else:

* a pickup waits for the food (``ready = ready_at``) and has no deadline;
* a drop-off is due at ``promised_at`` (lateness counts from there) and must arrive within
  ``promised_at + max_lateness_s`` (hard);
* a rider starts at ``max(now, available_at)`` from its position with its picked-up load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from domain import DispatchRound, LatLng, LocalProjection, Order, Rider, Stop, StopKind
from kernels.arrays import OrderArrays, RouteArrays


@dataclass(frozen=True)
class PackedRound:
    """A round as arrays plus what it takes to turn kernel answers back into domain types.

    routes : RouteArrays of R riders (round order), L = longest route (at least 1 slot).
    orders : OrderArrays of the round's O new orders (round order).
    route_stops : per rider, its stops in slot order.
    stop_orders : per rider, the Order behind each stop.
    """

    routes: RouteArrays
    orders: OrderArrays
    projection: LocalProjection
    route_stops: list[tuple[Stop, ...]]
    stop_orders: list[tuple[Order, ...]]


def _positions(round_: DispatchRound) -> list[LatLng]:
    pts = [r.position for r in round_.riders]
    pts += [o.pickup for o in round_.orders]
    pts += [o.dropoff for o in round_.orders]
    return pts


def _xy(projection: LocalProjection, points: list[LatLng]) -> np.ndarray:
    if not points:
        return np.zeros((0, 2), np.float32)
    lat = np.fromiter((p.lat for p in points), np.float64, len(points))
    lng = np.fromiter((p.lng for p in points), np.float64, len(points))
    return projection.to_xy(lat, lng).astype(np.float32)


def pack_orders(
    orders: tuple[Order, ...] | list[Order],
    projection: LocalProjection,
    now: float,
    max_lateness_s: float,
) -> OrderArrays:
    """New orders as ``OrderArrays`` (each with its pickup still to do)."""
    n = len(orders)
    f = np.float32
    due = np.array([o.promised_at - now for o in orders], f).reshape(n)
    return OrderArrays(
        pickup_xy=_xy(projection, [o.pickup for o in orders]),
        dropoff_xy=_xy(projection, [o.dropoff for o in orders]),
        ready=np.array([o.ready_at - now for o in orders], f).reshape(n),
        pickup_latest=np.full(n, np.inf, f),
        due=due,
        dropoff_latest=(due + f(max_lateness_s)).astype(f),
        dropoff_ready=np.full(n, -np.inf, f),
        pickup_service=np.array([o.pickup_service_s for o in orders], f).reshape(n),
        dropoff_service=np.array([o.dropoff_service_s for o in orders], f).reshape(n),
        size=np.array([o.size for o in orders], f).reshape(n),
        has_pickup=np.ones(n, np.bool_),
    ).check()


def pack_riders(
    riders: tuple[Rider, ...] | list[Rider],
    projection: LocalProjection,
    now: float,
    max_lateness_s: float,
    min_slots: int = 1,
) -> tuple[RouteArrays, list[tuple[Stop, ...]], list[tuple[Order, ...]]]:
    """Riders' current routes as ``RouteArrays`` (L = max(longest route, min_slots))."""
    n_routes = len(riders)
    n_slots = max([len(r.route) for r in riders] + [min_slots])
    routes = RouteArrays.empty(n_routes, n_slots)
    f = np.float32
    routes.start_xy[:] = _xy(projection, [r.position for r in riders])
    routes.start_time[:] = [
        max(now, r.available_at if r.available_at is not None else now) - now for r in riders
    ]
    routes.speed[:] = [r.speed_mps for r in riders]
    routes.capacity[:] = [r.capacity for r in riders]
    routes.load0[:] = [r.onboard_load for r in riders]
    lengths = np.array([len(r.route) for r in riders], np.int32).reshape(n_routes)
    routes.n_stops[:] = lengths
    routes.insert_limit[:] = lengths

    route_stops: list[tuple[Stop, ...]] = []
    stop_orders: list[tuple[Order, ...]] = []
    rows: list[int] = []
    cols: list[int] = []
    points: list[LatLng] = []
    ready: list[float] = []
    due: list[float] = []
    service: list[float] = []
    load: list[float] = []
    for r_idx, rider in enumerate(riders):
        by_id = {o.id: o for o in rider.orders}
        behind = tuple(by_id[s.order_id] for s in rider.route.stops)
        route_stops.append(rider.route.stops)
        stop_orders.append(behind)
        for q, (stop, order) in enumerate(zip(rider.route.stops, behind, strict=True)):
            rows.append(r_idx)
            cols.append(q)
            if stop.kind is StopKind.PICKUP:
                points.append(order.pickup)
                ready.append(order.ready_at - now)
                due.append(np.inf)
                service.append(order.pickup_service_s)
                load.append(order.size)
            else:
                points.append(order.dropoff)
                ready.append(-np.inf)
                due.append(order.promised_at - now)
                service.append(order.dropoff_service_s)
                load.append(-order.size)
    if rows:
        r_i, c_i = np.array(rows), np.array(cols)
        due_a = np.array(due, f)
        routes.stop_xy[r_i, c_i] = _xy(projection, points)
        routes.stop_ready[r_i, c_i] = np.array(ready, f)
        routes.stop_due[r_i, c_i] = due_a
        routes.stop_latest[r_i, c_i] = due_a + f(max_lateness_s)
        routes.stop_service[r_i, c_i] = np.array(service, f)
        routes.stop_load[r_i, c_i] = np.array(load, f)
    return routes.check(), route_stops, stop_orders


def pack_round(round_: DispatchRound) -> PackedRound:
    """Pack a round; raises ValueError only for arrays that fail their own checks."""
    projection = LocalProjection.around(_positions(round_))
    max_late = round_.weights.max_lateness_s
    routes, route_stops, stop_orders = pack_riders(round_.riders, projection, round_.now, max_late)
    orders = pack_orders(round_.orders, projection, round_.now, max_late)
    return PackedRound(routes, orders, projection, route_stops, stop_orders)
