"""The compiled build of ``insertion_bounds``: one thread per block of routes, orders innermost.

Each route's positions are walked once, and for each position every order's bound is computed in
one straight loop over the orders' columns (structure of arrays), which the compiler turns into
SIMD code: a 5000 x 2000 round's ten million bounds take a few tens of milliseconds on two cores,
against seconds for the exact prices. ``fastmath`` lets it reorder the float32 sums, so a bound
may differ from the array build's in the last bits; callers compare with a tolerance
(``certified_assign``), and ``tests/kernels/test_insertion_bounds.py`` holds the two builds to
it and both below the exact prices.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from kernels._jit_builds import serial_and_parallel

_F0 = np.float32(0.0)
_INF = np.float32(np.inf)


def lower_bounds_all(  # pragma: no cover - compiled
    node_xy,
    depart_prev,
    leg,
    arrival,
    cum_wait,
    hard_min,
    soft_min,
    load_before,
    speed_r,
    capacity,
    n_stops,
    insert_limit,
    px,
    py,
    qx,
    qy,
    ready_o,
    pickup_latest,
    due_o,
    dropoff_latest,
    pickup_service,
    size_o,
    has_pickup,
    floor_o,
    late_weight,
    out,
):
    """Fill out[R, O] with the bound of ``insertion_bounds`` (the module doc there); positions
    are walked from the last to the first, so the best later drop-off is a running minimum."""
    n_routes = node_xy.shape[0]
    n_orders = px.shape[0]
    w = late_weight
    for r in prange(n_routes):
        inv = np.float32(1.0) / speed_r[r]
        n = n_stops[r]
        limit = insert_limit[r]
        cap = capacity[r]
        row = out[r]
        p_next = np.zeros(n_orders, np.float32)  # driving P -> node i+1 (0 past the end)
        d_next = np.zeros(n_orders, np.float32)  # driving D -> node i+1
        later = np.full(n_orders, _INF, np.float32)  # best drop-off term over positions > i
        t_pd = np.empty(n_orders, np.float32)
        for o in range(n_orders):
            ex = px[o] - qx[o]
            ey = py[o] - qy[o]
            t_pd[o] = np.sqrt(ex * ex + ey * ey) * inv
            row[o] = _INF
        for i in range(limit, -1, -1):
            # At the route's end there is no stop i: nothing is delayed and no leg replaced.
            has_next = np.float32(1.0) if i < n else _F0
            ax, ay = node_xy[r, i, 0], node_xy[r, i, 1]
            dep_prev = depart_prev[r, i]
            arr_i = arrival[r, i] if i < n else _F0
            leg_i = leg[r, i]
            wait_i = cum_wait[r, i]
            hard_i = hard_min[r, i]
            soft_i = soft_min[r, i]
            room = cap - load_before[r, i]
            for o in range(n_orders):
                dx = px[o] - ax
                dy = py[o] - ay
                p_in = np.sqrt(dx * dx + dy * dy) * inv
                ex = qx[o] - ax
                ey = qy[o] - ay
                d_in = np.sqrt(ex * ex + ey * ey) * inv
                p_out = p_next[o] * has_next
                d_out = d_next[o] * has_next
                # Pickup at i.
                arr_p = dep_prev + p_in
                dep_p = max(arr_p, ready_o[o]) + pickup_service[o]
                x1 = max((dep_p + p_out) - arr_i, _F0) * has_next + wait_i
                late_stops = max(x1 - soft_i, _F0)
                arr_d = dep_p + t_pd[o]
                fl = floor_o[o]
                due = due_o[o]
                late_new = max(max(arr_d, fl) - due, _F0)
                p_only = ((p_in + p_out) - leg_i) + w * (late_stops + late_new)
                together = (((p_in + t_pd[o]) + d_out) - leg_i) + w * (late_stops + late_new)
                apart = (((p_in + p_out) - leg_i) + w * late_stops) + later[o]
                bound = max(p_only, min(together, apart))
                ok = (
                    (arr_p <= pickup_latest[o])
                    & (x1 <= hard_i)
                    & (arr_d <= dropoff_latest[o])
                    & (size_o[o] <= room)
                )
                bound = bound if ok else _INF
                row[o] = min(row[o], bound)
                # Drop-off at i, for the pickups before it.
                arr_dj = dep_prev + d_in
                drop = ((d_in + d_out) - leg_i) + w * max(max(arr_dj, fl) - due, _F0)
                drop = drop if arr_dj <= dropoff_latest[o] else _INF
                later[o] = min(later[o], drop)
                p_next[o] = p_in
                d_next[o] = d_in
        for o in range(n_orders):
            if not has_pickup[o]:  # only a drop-off to place: no bound claimed
                row[o] = _F0


# fastmath: the bound's float32 sums may be reordered (its callers allow for rounding).
lower_bounds_serial, lower_bounds_parallel = serial_and_parallel(
    lower_bounds_all, fastmath=True, error_model="numpy"
)


def warm_up() -> None:
    """Compile (or load from the on-disk cache) both builds for read-only inputs, as
    ``insertion_bounds`` passes them (see ``_insertion_costs_jit._read_only``)."""
    from kernels._insertion_costs_jit import _read_only as c
    from kernels._insertion_costs_jit import route_context_jit
    from kernels.arrays import RouteArrays

    routes = RouteArrays.empty(1, 1).check()
    ctx = route_context_jit(routes)
    f32 = np.float32
    one = c(np.zeros(1, f32))
    out = np.empty((1, 1), f32)
    route_args = (
        *(ctx.node_xy, ctx.depart_prev, ctx.leg, ctx.arrival, ctx.cum_wait),
        *(ctx.hard_min, ctx.soft_min, ctx.load_before),
        *(routes.speed, routes.capacity, routes.n_stops, routes.insert_limit),
    )
    for build in (lower_bounds_serial, lower_bounds_parallel):
        build(
            *(c(a) for a in route_args),
            *([one] * 10),
            c(np.ones(1, np.bool_)),
            one,
            f32(1.0),
            out,
        )
