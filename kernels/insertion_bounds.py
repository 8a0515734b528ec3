"""``insertion_lower_bounds``: a cheap lower bound on every (route, order) insertion price.

What the exact price (``insertion_costs``) spends its time on is the pair of positions (i, j):
O(L^2) placements per pair, each with its own lateness sums. This bound walks the positions once
(O(L) per pair) and prices what any placement must pay at least. With the pickup P after node
i (driving ``t``, node 0 the start, node q+1 stop q):

* ``late_stops(i)``: the rider reaches stop i no earlier than ``dep_P + t(P, stop_i)`` (with the
  drop-off D in between the path only gets longer), so the forward-slack quantity of the exact
  kernel is at least ``x1`` from there on: lateness grows by at least
  ``max(0, x1 - soft_min[i])``, and the placement is infeasible if ``x1 > hard_min[i]``;
* ``late_new``: D is reached no earlier than ``dep_P + t(P, D)`` (or than the ETR floor where
  one is given), so the new order is at least that late; infeasible past its latest drop-off,
  when P is reached after its own deadline or when the box is full on the leg after P;
* driving, three ways, each exact or a relaxation of the exact kernel's sums:
  ``p_only``: the detour of P alone (removing D never makes a route longer: triangle
  inequality) plus both lateness terms; ``together`` (D right after P): the exact detour
  ``t(node_i, P) + t(P, D) + t(D, stop_i) - leg_i`` plus both lateness terms; ``apart`` (D after
  a later stop j): P's detour at i plus D's at j, exactly additive, with D's lateness from
  ``depart_prev[j] + t(node_j, D)`` (the rider leaves node j no earlier than planned).

The bound at i is ``max(p_only, min(together, min over j > i of apart))``, the bound of the pair
the least over i; +inf when every i is infeasible (then so is the exact price), and 0 for an
order already on board (not bounded). ``bound <= price`` always, up to float32 rounding;
``certified_assign`` uses it to skip the pairs that cannot win.

Two builds with one answer up to that rounding: ``_array_loop`` (any ``xp``, a Python loop over
positions) and the compiled build in ``_insertion_bounds_jit.py`` (the NumPy default).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels import compiled
from kernels.arrays import OrderArrays, RouteArrays, checked_pair
from kernels.insertion_types import RouteContext


def insertion_lower_bounds(
    routes: RouteArrays,
    orders: OrderArrays,
    *,
    late_weight: float,
    etr_floor: Any = None,
    ctx: RouteContext | None = None,
    method: str = "auto",
    parallel: bool | None = None,
) -> Any:
    """float32[R, O]: a lower bound on ``insertion_costs(...).cost`` (ETR-adjusted where
    ``etr_floor`` is given, as ``planner.dispatch_round.etr_adjusted_cost`` prices it).

    etr_floor : float32[O] earliest credible drop-off per order, seconds since now, or None.
    ctx : the routes' ``RouteContext`` when the caller already has it.
    method : "auto" (compiled on NumPy unless still loading, else the array loop), "jit" or
        "loop".
    parallel : the compiled build on the CPU's threads; None: from ``PARALLEL_MIN_WORK`` bounds.
    Raises ValueError on malformed arrays, mixed devices or an unknown method.
    """
    xp = checked_pair(routes, orders)
    if method == "auto":
        method = "jit" if xp is np and not compiled.warming() else "loop"
    if method not in ("jit", "loop"):
        raise ValueError(f"unknown method {method!r}: expected 'auto', 'jit' or 'loop'")
    if method == "jit" and xp is not np:
        raise ValueError("method 'jit' runs on NumPy arrays only")
    n_orders = len(orders)
    floor = (
        xp.full(n_orders, -xp.inf, xp.float32)
        if etr_floor is None
        else xp.asarray(etr_floor, dtype=xp.float32)
    )
    if floor.shape != (n_orders,):
        raise ValueError(f"etr_floor must have shape ({n_orders},), got {tuple(floor.shape)}")
    if ctx is None:
        if method == "jit":
            from kernels._insertion_costs_jit import route_context_jit

            ctx = route_context_jit(routes)
        else:
            from kernels.insertion_costs import route_context

            ctx = route_context(routes)
    if method == "jit":
        return _compiled(routes, orders, ctx, late_weight, floor, parallel)
    return _array_loop(routes, orders, ctx, late_weight, floor)


def _compiled(
    routes: RouteArrays,
    orders: OrderArrays,
    ctx: RouteContext,
    late_weight: float,
    floor: Any,
    parallel: bool | None,
) -> np.ndarray:
    from kernels._insertion_bounds_jit import lower_bounds_parallel, lower_bounds_serial
    from kernels._jit_builds import PARALLEL_MIN_WORK

    n_routes, n_slots = routes.shape
    out = np.empty((n_routes, len(orders)), np.float32)
    if parallel is None:
        parallel = n_routes * len(orders) * (n_slots + 1) >= PARALLEL_MIN_WORK
    # Read-only views, as a replica receives its arrays: one compiled specialisation.
    from kernels._insertion_costs_jit import _read_only as c

    (lower_bounds_parallel if parallel else lower_bounds_serial)(
        c(ctx.node_xy),
        c(ctx.depart_prev),
        c(ctx.leg),
        c(ctx.arrival),
        c(ctx.cum_wait),
        c(ctx.hard_min),
        c(ctx.soft_min),
        c(ctx.load_before),
        c(routes.speed),
        c(routes.capacity),
        c(routes.n_stops),
        c(routes.insert_limit),
        c(orders.pickup_xy[:, 0]),
        c(orders.pickup_xy[:, 1]),
        c(orders.dropoff_xy[:, 0]),
        c(orders.dropoff_xy[:, 1]),
        c(orders.ready),
        c(orders.pickup_latest),
        c(orders.due),
        c(orders.dropoff_latest),
        c(orders.pickup_service),
        c(orders.size),
        c(orders.has_pickup),
        c(floor),
        np.float32(late_weight),
        out,
    )
    return out


def _array_loop(
    routes: RouteArrays, orders: OrderArrays, ctx: RouteContext, late_weight: float, floor: Any
) -> Any:
    xp = routes.xp
    f32 = xp.float32
    n_routes, n_slots = routes.shape
    w = f32(late_weight)
    speed = routes.speed[:, None]
    pxy, dxy = orders.pickup_xy, orders.dropoff_xy
    t_pd = xp.sqrt((pxy[:, 0] - dxy[:, 0]) ** 2 + (pxy[:, 1] - dxy[:, 1]) ** 2)[None, :] / speed
    due, fl = orders.due[None, :], floor[None, :]

    def from_node(q: int, pt: Any) -> Any:
        nx, ny = ctx.node_xy[:, q, 0][:, None], ctx.node_xy[:, q, 1][:, None]
        return xp.sqrt((pt[None, :, 0] - nx) ** 2 + (pt[None, :, 1] - ny) ** 2) / speed

    shape = (n_routes, len(orders))
    best = xp.full(shape, xp.inf, f32)
    later = xp.full(shape, xp.inf, f32)
    for i in range(n_slots, -1, -1):
        allowed = (i <= routes.insert_limit)[:, None]
        has_next = (i < routes.n_stops)[:, None]
        p_in, d_in = from_node(i, pxy), from_node(i, dxy)
        p_out = xp.where(has_next, from_node(i + 1, pxy), 0).astype(f32)
        d_out = xp.where(has_next, from_node(i + 1, dxy), 0).astype(f32)
        dep_prev, leg_i = ctx.depart_prev[:, i : i + 1], ctx.leg[:, i : i + 1]
        arr_p = dep_prev + p_in
        dep_p = xp.maximum(arr_p, orders.ready[None, :]) + orders.pickup_service[None, :]
        arr_i = xp.where(has_next, ctx.arrival[:, i : i + 1], 0)
        x1 = xp.where(has_next, xp.maximum((dep_p + p_out) - arr_i, 0), 0)
        x1 = x1 + ctx.cum_wait[:, i : i + 1]
        late_stops = xp.maximum(x1 - ctx.soft_min[:, i : i + 1], 0)
        arr_d = dep_p + t_pd
        late_new = xp.maximum(xp.maximum(arr_d, fl) - due, 0)
        p_only = ((p_in + p_out) - leg_i) + w * (late_stops + late_new)
        together = (((p_in + t_pd) + d_out) - leg_i) + w * (late_stops + late_new)
        apart = (((p_in + p_out) - leg_i) + w * late_stops) + later
        bound = xp.maximum(p_only, xp.minimum(together, apart))
        ok = (
            allowed
            & (arr_p <= orders.pickup_latest[None, :])
            & (x1 <= ctx.hard_min[:, i : i + 1])
            & (arr_d <= orders.dropoff_latest[None, :])
            & (orders.size[None, :] <= routes.capacity[:, None] - ctx.load_before[:, i : i + 1])
        )
        best = xp.minimum(best, xp.where(ok, bound, xp.inf).astype(f32))
        arr_dj = dep_prev + d_in
        drop = ((d_in + d_out) - leg_i) + w * xp.maximum(xp.maximum(arr_dj, fl) - due, 0)
        drop_ok = allowed & (arr_dj <= orders.dropoff_latest[None, :])
        later = xp.minimum(later, xp.where(drop_ok, drop, xp.inf).astype(f32))
    return xp.where(orders.has_pickup[None, :], best, 0).astype(f32)
