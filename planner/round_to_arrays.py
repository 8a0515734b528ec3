"""Packing a round into the kernels' arrays, once per round: its riders as columns
(``planner.rider_columns``, from domain types in ``pack_round`` or from a request's wire form
at the edge) and its new orders.

Times become float32 seconds since ``round.now`` (absolute epoch seconds would lose whole seconds
in float32); positions become planar metres in the round's local projection (``domain.geo``).
The dispatch rules land in the arrays here and nowhere else:

* a pickup waits for the food (``ready = ready_at``) and has no deadline;
* a drop-off is due at ``promised_at`` (lateness counts from there) and must arrive within
  ``promised_at + max_lateness_s`` (hard);
* a rider starts at ``max(now, available_at)`` from its position with its picked-up load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from domain import DispatchRound, LocalProjection
from domain.order_columns import (
    DROPOFF_LAT,
    DROPOFF_LNG,
    DROPOFF_SERVICE,
    PICKUP_LAT,
    PICKUP_LNG,
    PICKUP_SERVICE,
    PROMISED,
    READY,
    SIZE,
    OrderColumns,
)
from kernels.arrays import OrderArrays, RouteArrays
from kernels.backend import to_numpy
from kernels.transfers import to_device
from planner.rider_columns import (
    AVAILABLE,
    CAPACITY,
    LAT,
    LNG,
    SPEED,
    RiderColumns,
    RiderLike,
    obeys_domain_rules,
    rider_columns,
)


@dataclass(frozen=True)
class RoundArrays:
    """A packed round as the OR stages exchange it (NumPy on the host between processes).

    routes : RouteArrays [R, L]; orders : OrderArrays [O]; owner : int32[R, L] order key per
    stop (0..O-1 the new orders, O.. the carried ones, -1 padding).
    """

    routes: RouteArrays
    orders: OrderArrays
    owner: Any

    def to(self, xp: Any) -> RoundArrays:
        """The same round on ``xp`` (host arrays to a device: the whole round in one copy)."""
        if xp is np or self.routes.xp is not np:
            owner = to_numpy(self.owner) if xp is np else xp.asarray(self.owner)
            return RoundArrays(self.routes.to(xp), self.orders.to(xp), owner)
        routes, orders = self.routes.arrays(), self.orders.arrays()
        moved = to_device([*routes, *orders, self.owner], xp)
        return RoundArrays(
            self.routes.with_arrays(moved[: len(routes)]),
            self.orders.with_arrays(moved[len(routes) : -1]),
            moved[-1],
        )

    @property
    def nbytes(self) -> int:
        """Bytes of array data (what a call carrying these arrays ships)."""
        batches = (self.routes, self.orders)
        arrays = [getattr(b, f) for b in batches for f in b.__dataclass_fields__]
        return int(sum(a.nbytes for a in arrays) + self.owner.nbytes)


@dataclass(frozen=True)
class PackedRound:
    """A round as arrays plus what it takes to turn kernel answers back into domain types.

    arrays : the arrays the OR stages take (``planner.dispatch_round.solve_round``): routes,
        RouteArrays of R riders (round order), L = longest route (at least 1 slot); orders,
        OrderArrays of the round's O new orders (round order); owner, int32[R, L] the order
        key of each stop: 0..O-1 the new orders, O + k the k-th distinct order met on the
        routes (riders in order, slots in order), -1 padding.
    now : the round's clock, seconds (array times are seconds since it).
    rider_ids : R rider ids, round order.
    order_ids : the order id of each key: the O new orders, then the carried ones.
    """

    arrays: RoundArrays
    projection: LocalProjection
    now: float
    rider_ids: list[str]
    order_ids: list[str]

    @property
    def routes(self) -> RouteArrays:
        return self.arrays.routes

    @property
    def orders(self) -> OrderArrays:
        return self.arrays.orders

    @property
    def owner(self) -> np.ndarray:
        return self.arrays.owner


def pack_orders(
    orders: OrderColumns, projection: LocalProjection, now: float, max_lateness_s: float
) -> OrderArrays:
    """New orders as ``OrderArrays`` (each with its pickup still to do)."""
    n = len(orders)
    f = np.float32
    v = orders.values
    due = (v[:, PROMISED] - now).astype(f)
    return OrderArrays(
        pickup_xy=projection.to_xy(v[:, PICKUP_LAT], v[:, PICKUP_LNG]).astype(f),
        dropoff_xy=projection.to_xy(v[:, DROPOFF_LAT], v[:, DROPOFF_LNG]).astype(f),
        ready=(v[:, READY] - now).astype(f),
        pickup_latest=np.full(n, np.inf, f),
        due=due,
        dropoff_latest=(due + f(max_lateness_s)).astype(f),
        dropoff_ready=np.full(n, -np.inf, f),
        pickup_service=v[:, PICKUP_SERVICE].astype(f),
        dropoff_service=v[:, DROPOFF_SERVICE].astype(f),
        size=v[:, SIZE].astype(f),
        has_pickup=np.ones(n, np.bool_),
    ).check()


def pack_riders(
    riders: RiderColumns,
    projection: LocalProjection,
    now: float,
    max_lateness_s: float,
    min_slots: int = 1,
    first_key: int = 0,
) -> tuple[RouteArrays, np.ndarray, list[str]]:
    """Riders' current routes as ``RouteArrays`` (L = max(longest route, min_slots)), with
    the stops' owner keys (int32[R, L]: ``first_key + k`` for the k-th distinct order met,
    -1 padding) and those orders' ids in key order. Raises ValueError when a stop names an
    order no rider carries."""
    n_routes = len(riders.ids)
    lengths = riders.route_len
    n_slots = max(int(lengths.max(initial=0)), min_slots)
    routes = RouteArrays.empty(n_routes, n_slots)
    f = np.float32
    head = riders.head
    available = head[:, AVAILABLE]
    starts = np.where(~riders.available_given | (available < now), now, available)
    routes.start_xy[:] = projection.to_xy(head[:, LAT], head[:, LNG])
    routes.start_time[:] = starts - now
    routes.speed[:] = head[:, SPEED]
    routes.capacity[:] = head[:, CAPACITY]
    routes.load0[:] = riders.onboard_load()
    routes.n_stops[:] = lengths
    routes.insert_limit[:] = lengths

    owner = np.full((n_routes, n_slots), -1, np.int32)
    rows = riders.stop_rows
    if (rows < 0).any():
        raise ValueError("a route stop names an order no rider carries")
    if not len(rows):
        return routes.check(), owner, []
    # An order's key: how many distinct orders were met before it, riders in order.
    met, first = np.unique(rows, return_index=True)
    in_key_order = met[np.argsort(first, kind="stable")]
    key_of_row = np.empty(len(riders.carried_ids), np.int64)
    key_of_row[in_key_order] = np.arange(len(in_key_order))
    keys = key_of_row[rows]
    of = riders.carried[rows]
    at_pickup = riders.stop_pickup
    # The slots a route fills, row-major: the same order as the stops.
    filled = np.arange(n_slots)[None, :] < lengths[:, None]
    owner[filled] = keys + first_key
    lat = np.where(at_pickup, of[:, PICKUP_LAT], of[:, DROPOFF_LAT])
    lng = np.where(at_pickup, of[:, PICKUP_LNG], of[:, DROPOFF_LNG])
    due = np.where(at_pickup, np.inf, of[:, PROMISED] - now).astype(f)
    routes.stop_xy[filled] = projection.to_xy(lat, lng)
    routes.stop_ready[filled] = np.where(at_pickup, of[:, READY] - now, -np.inf)
    routes.stop_due[filled] = due
    routes.stop_latest[filled] = due + f(max_lateness_s)
    routes.stop_service[filled] = np.where(at_pickup, of[:, PICKUP_SERVICE], of[:, DROPOFF_SERVICE])
    routes.stop_load[filled] = np.where(at_pickup, of[:, SIZE], -of[:, SIZE])
    ids = riders.carried_ids
    return routes.check(), owner, [ids[k] for k in in_key_order.tolist()]


def pack_columns(
    now: float, riders: RiderColumns, orders: OrderColumns, max_lateness_s: float
) -> PackedRound:
    """Pack a round of ``riders`` and new ``orders`` (both as columns) at ``now``; raises
    ValueError only for arrays that fail their own checks."""
    # The projection's centre: riders' positions, then pickups, then drop-offs.
    v = orders.values
    lat = np.concatenate([riders.head[:, LAT], v[:, PICKUP_LAT], v[:, DROPOFF_LAT]]).tolist()
    lng = np.concatenate([riders.head[:, LNG], v[:, PICKUP_LNG], v[:, DROPOFF_LNG]]).tolist()
    projection = LocalProjection.around(lat, lng)
    routes, owner, carried_ids = pack_riders(
        riders, projection, now, max_lateness_s, first_key=len(orders)
    )
    packed_orders = pack_orders(orders, projection, now, max_lateness_s)
    order_ids = [*orders.ids, *carried_ids]
    arrays = RoundArrays(routes, packed_orders, owner)
    return PackedRound(arrays, projection, now, riders.ids, order_ids)


def pack_round(round_: DispatchRound) -> PackedRound:
    """Pack a round; raises ValueError only for arrays that fail their own checks."""
    columns = rider_columns(round_.riders)
    orders = OrderColumns.of(round_.orders)
    return pack_columns(round_.now, columns, orders, round_.weights.max_lateness_s)


def pack_served_round(
    now: float,
    riders: RiderColumns | Sequence[RiderLike],
    orders: OrderColumns,
    max_lateness_s: float,
    *,
    check: bool,
) -> PackedRound | None:
    """A served round packed: ``riders`` as columns (a gRPC message's) or as objects with
    ``domain.Rider``'s fields (domain riders, a JSON request's wire Structs: made columns
    here), the new ``orders`` as columns.

    check : the riders and orders come straight from a request, not through the domain
        types: they are held to the domain's rules for orders, riders and rounds first
        (``obeys_domain_rules``), and None is returned where those refuse them (the caller
        then reads the request with its model, whose error names the rider or order).
    Raises ValueError only for arrays that fail their own checks."""
    columns = riders if isinstance(riders, RiderColumns) else rider_columns(riders)
    if check and not obeys_domain_rules(columns, now, orders):
        return None
    return pack_columns(now, columns, orders, max_lateness_s)
