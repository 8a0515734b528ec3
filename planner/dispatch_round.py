"""``dispatch_round``: one round, end to end, as a pure function of a ``DispatchRound``.

pack -> insertion costs -> assignment -> insert (repeat up to max_orders_per_rider times, each
pass re-pricing the remaining orders against the routes that now hold the earlier picks) ->
relocate-improve the changed routes -> unpack into a ``DispatchPlan``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from domain import (
    Assignment,
    CostBreakdown,
    DispatchPlan,
    DispatchRound,
    Route,
    Stop,
    StopKind,
    Unassigned,
    UnassignedReason,
)
from kernels.arrays import OrderArrays, RouteArrays
from kernels.assign import assign
from kernels.backend import module_for, resolve_backend, to_numpy
from kernels.improve import improve
from kernels.insertion_costs import Insertions, insertion_costs
from kernels.route_edit import insert_orders
from kernels.schedule import schedule
from planner.packing import PackedRound, pack_round


def nearest_riders(routes: RouteArrays, orders: OrderArrays, k: int) -> tuple[Any, Any]:
    """Candidate pairs: each order with its k riders nearest to its pickup (straight line).

    Returns (rider index int[P], order index int[P]), P = O x min(k, R).
    """
    xp = routes.xp
    n_routes = routes.shape[0]
    k = min(k, n_routes)
    d = routes.start_xy[:, None, :] - orders.pickup_xy[None, :, :]
    d2 = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]  # [R, O]
    if k < n_routes:
        near = xp.argpartition(d2, k - 1, axis=0)[:k]  # [k, O]
    else:
        near = xp.broadcast_to(xp.arange(n_routes)[:, None], d2.shape)
    order_idx = xp.broadcast_to(xp.arange(d2.shape[1])[None, :], near.shape)
    return near.reshape(-1), order_idx.reshape(-1)


def _price(
    routes: RouteArrays, orders: OrderArrays, late_weight: float, candidates: int | None
) -> Insertions:
    """Insertion costs [R, O]; with ``candidates`` only the nearest riders per order are priced."""
    if candidates is None or candidates >= routes.shape[0]:
        return insertion_costs(routes, orders, late_weight=late_weight)
    xp = routes.xp
    ri, oi = nearest_riders(routes, orders, candidates)
    got = insertion_costs(routes.take(ri), orders.take(oi), late_weight=late_weight, pairs=True)
    shape = (routes.shape[0], len(orders))
    out = Insertions(
        cost=xp.full(shape, xp.inf, xp.float32),
        pickup_pos=xp.full(shape, -1, xp.int32),
        dropoff_pos=xp.full(shape, -1, xp.int32),
        travel=xp.zeros(shape, xp.float32),
        lateness=xp.zeros(shape, xp.float32),
        dropoff_arrival=xp.zeros(shape, xp.float32),
    )
    for name in Insertions.__dataclass_fields__:
        getattr(out, name)[ri, oi] = getattr(got, name)
    return out


def _owner_keys(packed: PackedRound, n_new: int) -> np.ndarray:
    """int32[R, L]: keys 0..O-1 are the new orders; carried orders get keys from O up."""
    n_routes, n_slots = packed.routes.shape
    owner = np.full((n_routes, n_slots), -1, np.int32)
    key: dict[str, int] = {}
    for r, orders in enumerate(packed.stop_orders):
        for q, order in enumerate(orders):
            owner[r, q] = key.setdefault(order.id, n_new + len(key))
    return owner


def dispatch_round(
    round_: DispatchRound, *, backend: str | None = None, improve_routes: bool = True
) -> DispatchPlan:
    """Plan a round.

    backend : "numpy", "cupy", "auto" or None (``ORML_BACKEND``, default auto).
    improve_routes : relocate-improve the routes that received orders.
    Returns a ``DispatchPlan``; every new order is assigned once or listed as unassigned.
    Raises RuntimeError if "cupy" is forced without a working GPU.
    """
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = (now - clock) * 1000.0
        clock = now

    name = resolve_backend(backend)
    xp = module_for(name)
    weights = round_.weights
    w = weights.late_weight
    packed = pack_round(round_)
    n_orders, n_routes = len(round_.orders), len(round_.riders)
    routes = packed.routes.to(xp)
    orders = packed.orders.to(xp)
    owner = xp.asarray(_owner_keys(packed, n_orders))
    base = schedule(routes)
    lap("pack_ms")

    rider_of = np.full(n_orders, -1, np.int64)
    assigned_cost = np.zeros(n_orders)
    ever_feasible = np.zeros(n_orders, bool)
    taken = np.zeros(n_routes, np.int64)
    timings["insertion_ms"] = timings["assign_ms"] = 0.0
    for _ in range(weights.max_orders_per_rider if n_routes else 0):
        open_orders = np.nonzero(rider_of < 0)[0]
        open_riders = np.nonzero(taken < weights.max_orders_per_rider)[0]
        if open_orders.size == 0 or open_riders.size == 0:
            break
        sub_routes = routes.take(xp.asarray(open_riders))
        sub_orders = orders.take(xp.asarray(open_orders))
        ins = _price(sub_routes, sub_orders, w, weights.candidate_riders)
        cost = ins.cost
        ever_feasible[open_orders] |= to_numpy(xp.isfinite(cost).any(axis=0))
        lap_ins = time.perf_counter()
        timings["insertion_ms"] += (lap_ins - clock) * 1000.0
        pick = to_numpy(assign(cost))
        got = np.nonzero(pick >= 0)[0]
        clock_a = time.perf_counter()
        timings["assign_ms"] += (clock_a - lap_ins) * 1000.0
        clock = clock_a
        if got.size == 0:
            break
        sub_r = pick[got]
        rows, order_idx = open_riders[sub_r], open_orders[got]
        ii, jj = to_numpy(ins.pickup_pos)[sub_r, got], to_numpy(ins.dropoff_pos)[sub_r, got]
        assigned_cost[order_idx] = to_numpy(cost)[sub_r, got]
        routes, owner = insert_orders(
            routes,
            owner,
            xp.asarray(rows),
            orders.take(xp.asarray(order_idx)),
            xp.asarray(ii),
            xp.asarray(jj),
            xp.asarray(order_idx.astype(np.int32)),
        )
        rider_of[order_idx] = rows
        taken[rows] += 1
        lap("insert_ms")

    changed = np.unique(rider_of[rider_of >= 0])
    if improve_routes and changed.size:
        routes, owner, _ = improve(routes, owner, late_weight=w, rows=xp.asarray(changed))
    lap("improve_ms")
    plan = _unpack(
        round_, packed, routes, owner, base, rider_of, assigned_cost, ever_feasible, changed, name
    )
    lap("unpack_ms")
    timings["total_ms"] = sum(timings.values())
    return DispatchPlan(
        assignments=plan.assignments,
        routes=plan.routes,
        predicted_arrival=plan.predicted_arrival,
        cost=plan.cost,
        unassigned=plan.unassigned,
        backend=name,
        timings_ms=timings,
    )


def _unpack(
    round_: DispatchRound,
    packed: PackedRound,
    routes: RouteArrays,
    owner: Any,
    base: Any,
    rider_of: np.ndarray,
    assigned_cost: np.ndarray,
    ever_feasible: np.ndarray,
    changed: np.ndarray,
    backend: str,
) -> DispatchPlan:
    w = round_.weights.late_weight
    routes_np = routes.to(np)
    owner_np = to_numpy(owner)
    sched = schedule(routes_np)
    n_new = len(round_.orders)
    carried = {}
    for orders in packed.stop_orders:
        for order in orders:
            carried.setdefault(order.id, order)
    by_key = {k: o for k, o in enumerate(round_.orders)}
    for key, order in enumerate(carried.values(), start=n_new):
        by_key[key] = order
    new_routes: dict[str, Route] = {}
    arrival: dict[str, float] = {}
    for r in changed.tolist():
        stops = []
        for q in range(int(routes_np.n_stops[r])):
            order = by_key[int(owner_np[r, q])]
            if routes_np.stop_load[r, q] > 0:
                stops.append(Stop(order.id, StopKind.PICKUP))
            else:
                stops.append(Stop(order.id, StopKind.DROPOFF))
                arrival[order.id] = round_.now + float(sched.arrival[r, q])
        new_routes[round_.riders[r].id] = Route(tuple(stops))
    travel = float(np.sum(sched.travel[changed]) - np.sum(to_numpy(base.travel)[changed]))
    late = float(
        np.sum(sched.total_lateness[changed]) - np.sum(to_numpy(base.total_lateness)[changed])
    )
    assignments = tuple(
        Assignment(o.id, round_.riders[int(rider_of[k])].id, float(assigned_cost[k]))
        for k, o in enumerate(round_.orders)
        if rider_of[k] >= 0
    )
    unassigned = []
    for k, o in enumerate(round_.orders):
        if rider_of[k] >= 0:
            continue
        if not round_.riders:
            reason = UnassignedReason.NO_RIDERS
        elif ever_feasible[k]:
            reason = UnassignedReason.RIDER_LIMIT
        else:
            reason = UnassignedReason.INFEASIBLE
        unassigned.append(Unassigned(o.id, reason))
    return DispatchPlan(
        assignments=assignments,
        routes=new_routes,
        predicted_arrival=arrival,
        cost=CostBreakdown(travel_s=travel, lateness_s=late, total=travel + w * late),
        unassigned=tuple(unassigned),
        backend=backend,
    )
