"""``improve``: relocate orders within their routes while that lowers the route's cost.

The move: take one order off a route (both its stops; only the drop-off if it is on board) and
put it back at its cheapest feasible place, found by ``insertion_costs`` in pair mode on the
route without it. This covers or-opt moves of a pickup and of a drop-off, kept in precedence.
Per pass every order of every route is tried at once; each route takes its best move if it
lowers ``travel + late_weight x lateness`` by more than ``tol_s``; passes repeat until none does.

A route's search depends on no other route: for NumPy inputs it has a compiled twin that runs
each route's whole search (every pass) in one call (``kernels._improve_jit``), for CuPy inputs
one CUDA thread per route (``improve.cu``), the two bit-equal; the array loop below is the
reference they are held to (the same moves; it sums a route's lateness in another order).

Why it never makes a route worse or infeasible: a move is applied only if the re-simulated cost
drops, and the re-insertion never lets a stop arrive later than both its hard deadline and its
arrival on the route without the order, which is never later than on the original route.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels import compiled
from kernels.arrays import RouteArrays
from kernels.insertion_costs import insertion_costs
from kernels.route_edit import insert_orders, orders_on_routes, put_rows, remove_orders
from kernels.schedule import schedule


def route_cost(routes: RouteArrays, late_weight: float) -> Any:
    """float32[R]: driving time + late_weight x summed lateness, seconds."""
    sched = schedule(routes)
    return sched.travel + routes.xp.float32(late_weight) * sched.total_lateness


def improve(
    routes: RouteArrays,
    owner: Any,
    *,
    late_weight: float,
    rows: Any = None,
    max_passes: int = 2,
    tol_s: float = 1e-2,
    method: str = "auto",
) -> tuple[RouteArrays, Any, Any]:
    """Improve routes ``rows`` (default all, distinct) by relocating orders.

    owner : int32[R, L] order key of each stop (-1 for padding and fixed stops).
    method : "auto" (for NumPy the compiled search unless it is still loading, see
        ``kernels.compiled``, else the array loop; for CuPy the CUDA kernel), "jit" (NumPy),
        "cuda" (CuPy) or "loop" (any ``xp``).
    Returns (routes, owner, moves applied: an int, on CuPy a 0-d device array that syncs
    only when read). Inputs are not modified. Raises ValueError for an
    unknown method or one that does not run on the inputs' device.
    """
    routes.check()
    xp = routes.xp
    if rows is None:
        rows = xp.arange(routes.shape[0])
    if method == "auto":
        method = ("loop" if compiled.warming() else "jit") if xp is np else "cuda"
    if method == "jit":
        if xp is not np:
            raise ValueError("method 'jit' runs on NumPy arrays only")
        from kernels._improve_jit import improve_jit

        return improve_jit(routes, owner, rows, late_weight, max_passes, tol_s)
    if method == "cuda":
        if xp is np:
            raise ValueError("method 'cuda' runs on CuPy arrays only")
        from kernels._improve_cuda import improve_cuda

        return improve_cuda(routes, owner, rows, late_weight, max_passes, tol_s)
    if method != "loop":
        raise ValueError(f"unknown method {method!r}: expected 'auto', 'jit', 'cuda' or 'loop'")
    moves = 0
    for _ in range(max_passes):
        sub_owner = owner[rows]
        is_drop = (sub_owner >= 0) & (routes.stop_load[rows] < 0)
        cand_local, cand_slot = xp.nonzero(is_drop)
        if int(cand_local.shape[0]) == 0:
            break
        cand_rows = rows[cand_local]
        keys = sub_owner[cand_local, cand_slot]
        sub = routes.take(cand_rows)
        sub_own = owner[cand_rows]
        moving = orders_on_routes(sub, sub_own, keys)
        reduced, reduced_owner = remove_orders(sub, sub_own, keys)
        ins = insertion_costs(reduced, moving, late_weight=late_weight, pairs=True)
        now_cost = route_cost(sub, late_weight)
        gain = now_cost - (route_cost(reduced, late_weight) + ins.cost)
        gain = xp.where(xp.isfinite(gain), gain, -xp.inf)
        # Best candidate per route: sort by (route, gain) and keep the last of each route.
        order = xp.lexsort(xp.stack([gain, cand_rows]))
        last = xp.ones(order.shape[0], dtype=bool)
        last[:-1] = cand_rows[order][1:] != cand_rows[order][:-1]
        best = order[last]
        best = best[gain[best] > tol_s]
        if int(best.shape[0]) == 0:
            break
        new_sub, new_owner = insert_orders(
            reduced.take(best),
            reduced_owner[best],
            xp.arange(best.shape[0]),
            moving.take(best),
            ins.pickup_pos[best],
            ins.dropoff_pos[best],
            keys[best],
        )
        ok = route_cost(new_sub, late_weight) < now_cost[best] - tol_s / 2
        if not bool(ok.any()):
            break
        keep = xp.nonzero(ok)[0]
        routes, owner = put_rows(
            routes, owner, cand_rows[best][keep], new_sub.take(keep), new_owner[keep]
        )
        moves += int(keep.shape[0])
    return routes, owner, moves
