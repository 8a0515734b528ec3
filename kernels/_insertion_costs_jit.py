"""The CPU twin of ``insertion_costs.cu``: the same per-pair loop, compiled by Numba.

The NumPy loop (``insertion_costs._numpy_loop``) is vectorised over pairs with a Python loop over
positions, which is fast for many short routes and slow for a few long ones (a Li & Lim route of
50 stops is ~1,300 Python iterations of array calls for a handful of pairs). This module runs the
CUDA kernel's thread body instead, one (route, order) pair per ``prange`` iteration, so its cost
is proportional to the placements actually tried.

Every operation mirrors the ``.cu`` line for line in float32 (no fast-math, so LLVM does not fuse
multiply-adds or reorder sums; ``error_model="numpy"``, so a division by zero gives inf as in
NumPy and CUDA instead of raising), which is why ``tests/kernels/test_insertion_costs.py`` can hold
it bit-equal to the NumPy loop. The first call compiles (a few seconds; cached on disk after).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numba import njit, prange

from kernels._jit_builds import PARALLEL_MIN_WORK, serial_and_parallel
from kernels.arrays import OrderArrays, RouteArrays

_F0 = np.float32(0.0)
_INF = np.float32(np.inf)


@njit(cache=True, inline="always", error_model="numpy")
def _travel(ax, ay, bx, by, speed):  # pragma: no cover - compiled
    dx = ax - bx
    dy = ay - by
    sq = dx * dx
    sq = sq + dy * dy
    return np.sqrt(sq) / speed


@njit(cache=True, inline="always", error_model="numpy")
def _pos(x):  # pragma: no cover - compiled
    # fmaxf(x, 0): the comparison keeps float32 where max() with a literal could widen.
    return x if x > _F0 else _F0


def _price_all(  # pragma: no cover - compiled
    node_xy,
    depart_prev,
    leg,
    arrival,
    cum_wait,
    soft,
    hard,
    soft_min,
    hard_min,
    load_before,
    speed_r,
    capacity,
    n_stops,
    insert_limit,
    pickup_xy,
    dropoff_xy,
    ready_o,
    pickup_latest,
    due_o,
    dropoff_latest,
    dropoff_ready,
    pickup_service,
    dropoff_service,
    size_o,
    has_pickup,
    pairs,
    at_route,
    at_order,
    late_weight,
    out_cost,
    out_travel,
    out_lateness,
    out_arrival,
    out_i,
    out_j,
):
    n_routes = node_xy.shape[0]
    n_orders = pickup_xy.shape[0]
    n_slots = node_xy.shape[1] - 2
    indexed = at_route.shape[0] > 0
    total = at_route.shape[0] if indexed else (n_routes if pairs else n_routes * n_orders)
    for idx in prange(total):
        # prange's index may be unsigned; int64 arithmetic keeps r and o integers.
        k = np.int64(idx)
        if indexed:
            r = np.int64(at_route[k])
            o = np.int64(at_order[k])
        else:
            r = k if pairs else k // n_orders
            o = k if pairs else k % n_orders
        node = node_xy[r]
        speed = speed_r[r]
        cap = capacity[r]
        n = n_stops[r]
        limit = insert_limit[r]
        px, py = pickup_xy[o, 0], pickup_xy[o, 1]
        dx, dy = dropoff_xy[o, 0], dropoff_xy[o, 1]
        hp = has_pickup[o]
        ready, p_latest = ready_o[o], pickup_latest[o]
        due, d_latest, d_ready = due_o[o], dropoff_latest[o], dropoff_ready[o]
        p_svc, d_svc = pickup_service[o], dropoff_service[o]
        size = size_o[o]
        if hp:
            t_pd = _travel(px, py, dx, dy, speed)
        else:
            t_pd = _travel(node[0, 0], node[0, 1], dx, dy, speed)

        best_cost = _INF
        best_late = _F0
        best_arr = _F0
        best_i = -1
        best_j = -1
        for i in range(limit + 1):
            if not hp and i > 0:
                break
            nxt_i = i < n
            t_in = _travel(node[i, 0], node[i, 1], px, py, speed)
            t_out = _travel(node[i + 1, 0], node[i + 1, 1], px, py, speed)
            arr_p = depart_prev[r, i] + t_in if hp else depart_prev[r, 0]
            dep_p = (arr_p if arr_p > ready else ready) + p_svc if hp else arr_p
            delta1 = _pos((dep_p + t_out) - arrival[r, i]) if (nxt_i and hp) else _F0
            x1 = delta1 + cum_wait[r, i]
            travel_p = (t_in + t_out) - leg[r, i] if nxt_i else t_in
            if not hp:
                travel_p = _F0
                t_in = _F0
            ok_mid = (not hp or arr_p <= p_latest) and (not hp or load_before[r, i] + size <= cap)
            run_soft = _F0
            for j in range(i, limit + 1):
                nxt = j < n
                t_dj = _travel(node[j, 0], node[j, 1], dx, dy, speed)
                t_dn = _travel(node[j + 1, 0], node[j + 1, 1], dx, dy, speed)
                close = t_dn - leg[r, j] if nxt else _F0
                thr = (arrival[r, j] - d_svc) - t_dn if nxt else _INF
                if j == i:
                    arr_d = dep_p + t_pd
                    travel = (t_in + t_pd) + close
                else:
                    m = j - 1  # stop j-1 now lies between P and D
                    run_soft = run_soft + _pos(x1 - soft[r, m])
                    ok_mid = (
                        ok_mid
                        and (x1 <= hard[r, m])
                        and (not hp or load_before[r, j] + size <= cap)
                    )
                    shift = _pos(x1 - cum_wait[r, j])
                    arr_d = (depart_prev[r, j] + shift) + t_dj
                    travel = (travel_p + t_dj) + close
                start_d = arr_d if arr_d > d_ready else d_ready
                x2 = _pos(start_d - thr) + cum_wait[r, j]
                if not (ok_mid and arr_d <= d_latest and x2 <= hard_min[r, j]):
                    continue
                late = run_soft + _pos(arr_d - due)
                cost = travel + late_weight * late
                if x2 > soft_min[r, j] and cost < best_cost:
                    suffix = _F0
                    for q in range(j, n_slots):
                        suffix = suffix + _pos(x2 - soft[r, q])
                    late = late + suffix
                    cost = travel + late_weight * late
                if cost < best_cost:
                    best_cost = cost
                    best_late = late
                    best_arr = arr_d
                    best_i = i
                    best_j = j
        out_cost[idx] = best_cost
        out_travel[idx] = best_cost - late_weight * best_late if best_i >= 0 else _F0
        out_lateness[idx] = best_late
        out_arrival[idx] = best_arr
        out_i[idx] = best_i
        out_j[idx] = best_j


# Two compilations of one body: waking the thread pool costs more than a small batch (a solver
# re-pricing one route) takes on one core.
_price_serial, _price_parallel = serial_and_parallel(_price_all, error_model="numpy")


@njit(cache=True, nogil=True, error_model="numpy")
def _context_all(  # pragma: no cover - compiled
    start_xy,
    start_time,
    speed,
    load0,
    n_stops,
    stop_xy,
    stop_ready,
    stop_due,
    stop_latest,
    stop_service,
    stop_load,
    node_xy,
    depart_prev,
    leg,
    arrival,
    cum_wait,
    soft,
    hard,
    soft_min,
    hard_min,
    load_before,
):
    """``route_context`` route by route; outputs arrive zeroed (see ``route_context_jit``)."""
    n_routes, n_slots = stop_ready.shape
    for r in range(n_routes):
        n = n_stops[r]
        node_xy[r, 0, 0] = start_xy[r, 0]
        node_xy[r, 0, 1] = start_xy[r, 1]
        depart_prev[r, 0] = start_time[r]
        load_before[r, 0] = load0[r]
        t = start_time[r]
        hx, hy = start_xy[r, 0], start_xy[r, 1]
        for q in range(n_slots):
            node_xy[r, q + 1, 0] = stop_xy[r, q, 0]
            node_xy[r, q + 1, 1] = stop_xy[r, q, 1]
            if q < n:
                g = _travel(stop_xy[r, q, 0], stop_xy[r, q, 1], hx, hy, speed[r])
                a = t + g
                rd = stop_ready[r, q]
                dep = (a if a > rd else rd) + stop_service[r, q]
                arrival[r, q] = a
                depart_prev[r, q + 1] = dep
                leg[r, q] = g
                wait = (a if a > rd else rd) - a
                cum_wait[r, q + 1] = cum_wait[r, q] + wait
                soft[r, q] = cum_wait[r, q] + _pos(stop_due[r, q] - a)
                hard[r, q] = cum_wait[r, q] + _pos(stop_latest[r, q] - a)
                load_before[r, q + 1] = load_before[r, q] + stop_load[r, q]
                t = dep
                hx, hy = stop_xy[r, q, 0], stop_xy[r, q, 1]
            else:
                arrival[r, q] = _INF
                cum_wait[r, q + 1] = cum_wait[r, q]
                soft[r, q] = _INF
                hard[r, q] = _INF
                load_before[r, q + 1] = load_before[r, q]
        arrival[r, n_slots] = _INF
        soft[r, n_slots] = _INF
        hard[r, n_slots] = _INF
        soft_min[r, n_slots] = _INF
        hard_min[r, n_slots] = _INF
        for q in range(n_slots - 1, -1, -1):
            soft_min[r, q] = min(soft[r, q], soft_min[r, q + 1])
            hard_min[r, q] = min(hard[r, q], hard_min[r, q + 1])


def _read_only(a: np.ndarray) -> np.ndarray:
    """A C-contiguous read-only view (a copy only where ``a`` is not contiguous).

    Numba compiles one specialisation per argument type, and read-only is part of the type: the
    arrays a Ray replica receives are read-only (zero-copy deserialisation), those built in
    process are not. Passing every input read-only means one specialisation, the one
    ``warm_up`` compiles, instead of a second compile (seconds, GIL held) on a replica's first
    request.
    """
    view = np.ascontiguousarray(a).view()
    view.flags.writeable = False
    return view


def route_context_jit(routes: RouteArrays) -> Any:
    """``insertion_costs.route_context`` for NumPy arrays, compiled; the same numbers."""
    from kernels.insertion_types import RouteContext, context_buffers

    n_routes, n_slots = routes.shape
    out = context_buffers(np, n_routes, n_slots)
    c = _read_only
    _context_all(
        c(routes.start_xy),
        c(routes.start_time),
        c(routes.speed),
        c(routes.load0),
        c(routes.n_stops),
        c(routes.stop_xy),
        c(routes.stop_ready),
        c(routes.stop_due),
        c(routes.stop_latest),
        c(routes.stop_service),
        c(routes.stop_load),
        *(out[name] for name in RouteContext.__dataclass_fields__),
    )
    return RouteContext(**out)


def warm_up() -> None:
    """Compile (or load from the on-disk cache) both builds, so no request pays for it."""
    routes = RouteArrays.empty(1, 1)
    orders = OrderArrays(
        **{
            name: np.zeros((1, 2) if name.endswith("_xy") else 1, np.float32)
            for name in OrderArrays.__dataclass_fields__
        }
    )
    orders = replace(orders, has_pickup=np.ones(1, bool)).check()
    ctx = route_context_jit(routes)
    at = (np.zeros(1, np.int64), np.zeros(1, np.int64))
    for parallel in (False, True):
        insertion_costs_jit(routes, orders, ctx, 1.0, False, parallel)
        insertion_costs_jit(routes, orders, ctx, 1.0, False, parallel, at=at)


def insertion_costs_jit(
    routes: RouteArrays,
    orders: OrderArrays,
    ctx: Any,
    late_weight: float,
    pairs: bool,
    parallel: bool | None = None,
    at: tuple[np.ndarray, np.ndarray] | None = None,
) -> Any:
    """Price every pair on the CPU threads; arguments already checked by ``insertion_costs``.

    parallel : None picks the thread pool for batches of ``PARALLEL_MIN_WORK`` placements or
        more.
    at : (route index int64[P], order index int64[P]): price only these P pairs (results [P]),
        reading each route's context in place instead of copying a route per pair.
    """
    from kernels.insertion_types import Insertions

    n_routes = routes.shape[0]
    n_orders = len(orders)
    if at is not None:
        at_route, at_order = (np.ascontiguousarray(a, np.int64) for a in at)
        total = at_route.shape[0]
        shape: tuple[int, ...] = (total,)
    else:
        at_route = at_order = np.zeros(0, np.int64)
        total = n_routes if pairs else n_routes * n_orders
        shape = (n_routes,) if pairs else (n_routes, n_orders)
    if total == 0:
        empty = [np.zeros(shape, np.float32) for _ in range(4)]
        none = np.full(shape, -1, np.int32)
        return Insertions(empty[0] + np.inf, none, none.copy(), *empty[1:])
    out = [np.empty(total, np.float32) for _ in range(4)] + [
        np.empty(total, np.int32) for _ in range(2)
    ]
    c = _read_only
    if parallel is None:
        parallel = total * (routes.shape[1] + 1) ** 2 // 2 >= PARALLEL_MIN_WORK
    price = _price_parallel if parallel else _price_serial
    price(
        c(ctx.node_xy),
        c(ctx.depart_prev),
        c(ctx.leg),
        c(ctx.arrival),
        c(ctx.cum_wait),
        c(ctx.soft),
        c(ctx.hard),
        c(ctx.soft_min),
        c(ctx.hard_min),
        c(ctx.load_before),
        c(routes.speed),
        c(routes.capacity),
        c(routes.n_stops),
        c(routes.insert_limit),
        c(orders.pickup_xy),
        c(orders.dropoff_xy),
        c(orders.ready),
        c(orders.pickup_latest),
        c(orders.due),
        c(orders.dropoff_latest),
        c(orders.dropoff_ready),
        c(orders.pickup_service),
        c(orders.dropoff_service),
        c(orders.size),
        c(orders.has_pickup),
        pairs,
        c(at_route),
        c(at_order),
        np.float32(late_weight),
        *out,
    )
    cost, travel, late, arrival, best_i, best_j = (a.reshape(shape) for a in out)
    return Insertions(cost, best_i, best_j, travel, late, arrival)
