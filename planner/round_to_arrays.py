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
    owner : int32[R, L] order key of each stop: 0..O-1 the new orders, O + k the carried
        order ``carried[k]``, -1 padding.
    carried : the orders on the riders' routes, once each, in key order.
    """

    routes: RouteArrays
    orders: OrderArrays
    projection: LocalProjection
    route_stops: list[tuple[Stop, ...]]
    owner: np.ndarray
    carried: list[Order]


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
    first_key: int = 0,
) -> tuple[RouteArrays, list[tuple[Stop, ...]], np.ndarray, list[Order]]:
    """Riders' current routes as ``RouteArrays`` (L = max(longest route, min_slots)), with
    each rider's stops, the stops' owner keys (int32[R, L]: ``first_key + k`` for the k-th
    distinct order met, -1 padding) and those orders in key order."""
    n_routes = len(riders)
    route_stops = [r.route.stops for r in riders]
    lengths = [len(stops) for stops in route_stops]
    n_slots = max([*lengths, min_slots])
    routes = RouteArrays.empty(n_routes, n_slots)
    f = np.float32
    # One row of plain floats per rider and per carried order, turned into arrays at once; a
    # stop is only its order's key and its kind: a 5000-rider round has ~30,000 stops, and a
    # row of floats per stop was most of the packing.
    head = np.array(
        [
            (
                r.position.lat,
                r.position.lng,
                r.speed_mps,
                r.capacity,
                r.onboard_load if r.picked_up else 0.0,
                now if r.available_at is None or r.available_at < now else r.available_at,
            )
            for r in riders
        ],
        np.float64,
    ).reshape(n_routes, 6)
    routes.start_xy[:] = projection.to_xy(head[:, 0], head[:, 1])
    routes.start_time[:] = head[:, 5] - now
    routes.speed[:] = head[:, 2]
    routes.capacity[:] = head[:, 3]
    routes.load0[:] = head[:, 4]
    routes.n_stops[:] = lengths
    routes.insert_limit[:] = lengths

    key_of: dict[str, int] = {}
    keys: list[int] = []  # per stop, riders in order, stops in slot order
    is_pickup: list[bool] = []
    pickup = StopKind.PICKUP
    for stops in route_stops:
        for stop in stops:  # an order's key: how many distinct orders were met before it
            keys.append(key_of.setdefault(stop.order_id, len(key_of)))
        is_pickup.extend([stop.kind is pickup for stop in stops])
    by_id = {o.id: o for r in riders for o in r.orders}
    carried = [by_id[oid] for oid in key_of]
    owner = np.full((n_routes, n_slots), -1, np.int32)
    if keys:
        # (pickup lat, lng, drop-off lat, lng, ready, due, services, size) of each carried order
        of = np.array(
            [
                (
                    o.pickup.lat,
                    o.pickup.lng,
                    o.dropoff.lat,
                    o.dropoff.lng,
                    o.ready_at - now,
                    o.promised_at - now,
                    o.pickup_service_s,
                    o.dropoff_service_s,
                    o.size,
                )
                for o in carried
            ],
            np.float64,
        ).reshape(len(carried), 9)[np.asarray(keys, np.int64)]
        at_pickup = np.asarray(is_pickup, np.bool_)
        # The slots a route fills, row-major: the same order as the stops.
        filled = np.arange(n_slots)[None, :] < np.asarray(lengths)[:, None]
        owner[filled] = np.asarray(keys, np.int32) + first_key
        lat = np.where(at_pickup, of[:, 0], of[:, 2])
        lng = np.where(at_pickup, of[:, 1], of[:, 3])
        due = np.where(at_pickup, np.inf, of[:, 5]).astype(f)
        routes.stop_xy[filled] = projection.to_xy(lat, lng)
        routes.stop_ready[filled] = np.where(at_pickup, of[:, 4], -np.inf)
        routes.stop_due[filled] = due
        routes.stop_latest[filled] = due + f(max_lateness_s)
        routes.stop_service[filled] = np.where(at_pickup, of[:, 6], of[:, 7])
        routes.stop_load[filled] = np.where(at_pickup, of[:, 8], -of[:, 8])
    return routes.check(), route_stops, owner, carried


def pack_round(round_: DispatchRound) -> PackedRound:
    """Pack a round; raises ValueError only for arrays that fail their own checks."""
    projection = LocalProjection.around(_positions(round_))
    max_late = round_.weights.max_lateness_s
    n_new = len(round_.orders)
    routes, route_stops, owner, carried = pack_riders(
        round_.riders, projection, round_.now, max_late, first_key=n_new
    )
    orders = pack_orders(round_.orders, projection, round_.now, max_late)
    return PackedRound(routes, orders, projection, route_stops, owner, carried)
