"""``insertion_costs``: the cheapest place to insert each order into each route.

For every (route r, order o) the kernel tries every pickup position i and drop-off position j
(``0 <= i <= j <= insert_limit[r]``; the new route is ``stops[:i] + P + stops[i:j] + D +
stops[j:]``) and keeps the cheapest feasible one:

    cost = added driving time + late_weight x added lateness (summed over every drop-off)

Feasible means: every arrival within its hard deadline (``*_latest``), the load within capacity on
every leg that carries the new order. Infeasible pairs cost ``+inf`` and positions ``-1``.

Why it is fast (the forward-slack idea, extended to soft lateness): a delay ``delta`` arriving at
stop k shrinks by each wait it meets, so the delay at a later stop m is
``max(0, delta - (C[m] - C[k]))`` with ``C`` the cumulative waiting time. Writing ``x = delta +
C[k]``, stop m gets later by ``max(0, x - T[m])`` with ``T[m] = C[m] + max(0, due[m] -
arrival[m])``, and breaks its hard deadline iff ``x > H[m] = C[m] + max(0, latest[m] -
arrival[m])``. So a placement needs no re-simulation: the segment between P and D is accumulated
as j grows (O(1) per placement), the suffix after D is rejected in O(1) by ``min H`` and costs 0
when ``x <= min T`` (the common case); only placements that make later stops late sum the hinges.

Three implementations with one answer, which ``tests/kernels/test_insertion_costs.py`` holds
bit-equal: ``_numpy_loop`` (any ``xp``, vectorised over pairs with a Python loop over positions),
the CUDA kernel in ``insertion_costs.cu`` (a thread per pair), and its CPU twin compiled by Numba
in ``_insertion_costs_jit.py`` (the same per-pair loop on the CPU threads; the NumPy default:
it pays no interpreter overhead per position, which the array loop pays most on few long
routes; ``bench/kernels.py`` measures both).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels import compiled
from kernels.arrays import OrderArrays, RouteArrays, checked_pair
from kernels.insertion_types import Insertions, RouteContext
from kernels.schedule import schedule, travel_time


def route_context(routes: RouteArrays, method: str = "auto") -> RouteContext:
    """Precompute ``RouteContext`` (any ``xp``); raises ValueError on malformed arrays.

    method : "auto" (one CUDA thread per route for CuPy inputs, else the array code), "cuda"
    or "loop" (the array code, any ``xp``). The two give the same numbers."""
    if method == "auto":
        method = "loop" if routes.xp is np else "cuda"
    if method == "cuda":
        if routes.xp is np:
            raise ValueError("method 'cuda' runs on CuPy arrays only")
        from kernels._insertion_costs_cuda import route_context_cuda

        return route_context_cuda(routes.check())
    if method != "loop":
        raise ValueError(f"unknown method {method!r}: expected 'auto', 'cuda' or 'loop'")
    sched = schedule(routes, method="loop" if routes.xp is not np else "auto")
    xp = routes.xp
    f32 = xp.float32
    n_routes, n_slots = routes.shape
    used = xp.arange(n_slots)[None, :] < routes.n_stops[:, None]
    inf = xp.float32(xp.inf)

    node_xy = xp.zeros((n_routes, n_slots + 2, 2), f32)
    node_xy[:, 0] = routes.start_xy
    node_xy[:, 1 : n_slots + 1] = routes.stop_xy

    arrival = xp.full((n_routes, n_slots + 1), inf, f32)
    arrival[:, :n_slots] = xp.where(used, sched.arrival, inf)
    depart_prev = xp.zeros((n_routes, n_slots + 1), f32)
    depart_prev[:, 0] = routes.start_time
    depart_prev[:, 1:] = xp.where(used, sched.departure, 0)
    leg = xp.zeros((n_routes, n_slots + 1), f32)
    if n_slots:
        leg[:, :n_slots] = xp.where(
            used,
            travel_time(
                node_xy[:, 1 : n_slots + 1], node_xy[:, :n_slots], routes.speed[:, None], xp
            ),
            0,
        )
    wait = xp.where(used, xp.maximum(sched.arrival, routes.stop_ready) - sched.arrival, 0).astype(
        f32
    )
    cum_wait = xp.zeros((n_routes, n_slots + 1), f32)
    for q in range(n_slots):
        cum_wait[:, q + 1] = cum_wait[:, q] + wait[:, q]

    soft = xp.full((n_routes, n_slots + 1), inf, f32)
    hard = xp.full((n_routes, n_slots + 1), inf, f32)
    a = xp.where(used, sched.arrival, 0)  # padding slots hold NaN; keep them out of the sums
    soft[:, :n_slots] = xp.where(
        used, cum_wait[:, :n_slots] + xp.maximum(routes.stop_due - a, 0), inf
    )
    hard[:, :n_slots] = xp.where(
        used, cum_wait[:, :n_slots] + xp.maximum(routes.stop_latest - a, 0), inf
    )
    soft_min = soft.copy()
    hard_min = hard.copy()
    for q in range(n_slots - 1, -1, -1):
        soft_min[:, q] = xp.minimum(soft_min[:, q], soft_min[:, q + 1])
        hard_min[:, q] = xp.minimum(hard_min[:, q], hard_min[:, q + 1])

    load_before = xp.zeros((n_routes, n_slots + 1), f32)
    load_before[:, 0] = routes.load0
    for q in range(n_slots):
        load_before[:, q + 1] = load_before[:, q] + xp.where(used[:, q], routes.stop_load[:, q], 0)
    return RouteContext(
        node_xy=node_xy,
        depart_prev=depart_prev,
        leg=leg,
        arrival=arrival,
        cum_wait=cum_wait,
        soft=soft,
        hard=hard,
        soft_min=soft_min,
        hard_min=hard_min,
        load_before=load_before,
    )


def insertion_costs(
    routes: RouteArrays,
    orders: OrderArrays,
    *,
    late_weight: float,
    pairs: bool = False,
    at: tuple[Any, Any] | None = None,
    method: str = "auto",
) -> Insertions:
    """Best insertion of every order into every route (or of order p into route p).

    routes : R routes (``RouteArrays``); orders : O orders (``OrderArrays``), on the same device.
    late_weight : seconds of driving one second of added lateness is worth (>= 0).
    pairs : if True, R must equal O and route p is priced with order p only; results are [P].
    at : (route index int[P], order index int[P]): price only these pairs; results are [P], the
        same numbers as the grid's entries ``[at[0], at[1]]``.
    method : "auto" (the CUDA kernel for CuPy inputs, the compiled CPU twin for NumPy unless it
        is still loading, see ``kernels.compiled``), "jit",
        "loop" (the array loop, any ``xp``) or "cuda".
    Returns ``Insertions`` of shape [R, O] or [P], on the inputs' device.
    Raises ValueError on malformed arrays, mixed devices or mismatched pair counts.
    """
    xp = checked_pair(routes, orders)
    if late_weight < 0 or not np.isfinite(late_weight):
        raise ValueError(f"late_weight must be finite and >= 0, got {late_weight!r}")
    if at is not None:
        if pairs:
            raise ValueError("give pairs=True or at, not both")
        at_route, at_order = at
        if at_route.shape != at_order.shape or at_route.ndim != 1:
            raise ValueError("at must be two 1-D index arrays of one length")
    if pairs and routes.shape[0] != len(orders):
        raise ValueError(
            f"pairs=True needs as many routes as orders, got {routes.shape[0]} and {len(orders)}"
        )
    if method == "auto":
        method = "cuda" if xp is not np else ("loop" if compiled.warming() else "jit")
    if method not in ("loop", "jit", "cuda"):
        raise ValueError(f"unknown method {method!r}: expected 'auto', 'jit', 'loop' or 'cuda'")
    if (method == "cuda" and xp is np) or (method == "jit" and xp is not np):
        raise ValueError(f"method {method!r} does not run on {xp.__name__} arrays")
    if method == "jit":
        from kernels._insertion_costs_jit import insertion_costs_jit, route_context_jit

        return insertion_costs_jit(
            routes, orders, route_context_jit(routes), late_weight, pairs, at=at
        )
    if at is not None:  # the other builds price an index list as aligned pairs
        return insertion_costs(
            routes.take(at[0]),
            orders.take(at[1]),
            late_weight=late_weight,
            pairs=True,
            method=method,
        )
    ctx = route_context(routes)
    if method == "cuda":
        from kernels._insertion_costs_cuda import insertion_costs_cuda

        return insertion_costs_cuda(routes, orders, ctx, late_weight, pairs)
    return _numpy_loop(routes, orders, ctx, late_weight, pairs)


def _rows(a: Any, k: int) -> Any:
    """The first k rows of a per-row array; a broadcast row (shape[0] == 1) is kept whole."""
    return a if a.shape[0] == 1 else a[:k]


def _numpy_loop(
    routes: RouteArrays, orders: OrderArrays, ctx: RouteContext, late_weight: float, pairs: bool
) -> Insertions:
    """The array implementation: vectorised over pairs, a Python loop over positions (i, j).

    On NumPy the routes are split into two halves priced on two threads (ufuncs release the GIL).
    """
    xp = routes.xp
    n_routes = routes.shape[0]
    if xp is np and n_routes >= 64:
        from concurrent.futures import ThreadPoolExecutor

        half = n_routes // 2
        parts = [np.arange(0, half), np.arange(half, n_routes)]
        with ThreadPoolExecutor(2) as pool:
            done = list(
                pool.map(
                    lambda idx: _price_rows(
                        routes.take(idx),
                        orders.take(idx) if pairs else orders,
                        RouteContext(
                            **{k: getattr(ctx, k)[idx] for k in RouteContext.__dataclass_fields__}
                        ),
                        late_weight,
                        pairs,
                    ),
                    parts,
                )
            )
        return Insertions(
            *(
                np.concatenate([getattr(d, f) for d in done])
                for f in Insertions.__dataclass_fields__
            )
        )
    return _price_rows(routes, orders, ctx, late_weight, pairs)


def _price_rows(
    routes: RouteArrays, orders: OrderArrays, ctx: RouteContext, late_weight: float, pairs: bool
) -> Insertions:
    xp = routes.xp
    f32 = xp.float32
    n_routes, n_slots = routes.shape
    n_orders = len(orders)
    out_shape = (n_routes,) if pairs else (n_routes, n_orders)
    # Rows sorted by insert_limit, longest first: the rows that allow position p are a prefix.
    perm = xp.argsort(-routes.insert_limit, kind="stable")
    limit = routes.insert_limit[perm]
    limit_host = np.asarray(limit.get() if hasattr(limit, "get") else limit)
    n_allowing = [int((limit_host >= p).sum()) for p in range(n_slots + 1)]
    n_stops = routes.n_stops[perm][:, None]
    speed = routes.speed[perm][:, None]
    c = {name: getattr(ctx, name)[perm] for name in RouteContext.__dataclass_fields__}
    cap = routes.capacity[perm][:, None]

    def order_field(a: Any) -> Any:
        # Grid: orders along axis 1, broadcast over routes. Pairs: one order per (sorted) row.
        return a[perm][:, None] if pairs else a[None, :]

    ready, p_latest = order_field(orders.ready), order_field(orders.pickup_latest)
    due, d_latest = order_field(orders.due), order_field(orders.dropoff_latest)
    d_ready = order_field(orders.dropoff_ready)
    p_svc, d_svc = order_field(orders.pickup_service), order_field(orders.dropoff_service)
    size, has_p = order_field(orders.size), order_field(orders.has_pickup)
    pxy = order_field(orders.pickup_xy)
    dxy = order_field(orders.dropoff_xy)

    # Driving times node q -> P and node q -> D, node-major [L+2, R, O] so t_p[q][:k] is one block.
    node = xp.ascontiguousarray(xp.moveaxis(c["node_xy"], 1, 0))  # [L+2, R, 2]

    def from_nodes(pt: Any) -> Any:
        dx = node[:, :, 0:1] - pt[None, :, :, 0]
        dy = node[:, :, 1:2] - pt[None, :, :, 1]
        return xp.sqrt(dx * dx + dy * dy) / speed[None]

    t_p, t_d = from_nodes(pxy), from_nodes(dxy)
    dpd = pxy - dxy
    t_pd = xp.sqrt(dpd[..., 0] * dpd[..., 0] + dpd[..., 1] * dpd[..., 1]) / speed
    # An order already on board has a virtual pickup at the start, which costs nothing.
    t_pd = xp.where(has_p, t_pd, t_d[0])
    # Per drop-off position j: the driving time D -> stop j replaces the leg into stop j
    # ("close"), and stop j is reached late iff D's arrival passes thr_j (+inf: no stop j).
    nxt_all = xp.arange(n_slots + 1)[:, None, None] < n_stops[None]  # [L+1, R, 1]
    leg_t = xp.moveaxis(c["leg"], 1, 0)[:, :, None]
    arr_t = xp.moveaxis(c["arrival"], 1, 0)[:, :, None]
    close = xp.where(nxt_all, t_d[1:] - leg_t, 0).astype(f32)
    thr = xp.where(nxt_all, (arr_t - d_svc[None]) - t_d[1:], xp.inf).astype(f32)

    width = 1 if pairs else n_orders
    best = xp.full((n_routes, width), xp.inf, f32)
    best_code = xp.full((n_routes, width), -1, xp.int32)
    best_late = xp.zeros((n_routes, width), f32)
    best_arr = xp.zeros((n_routes, width), f32)
    w = f32(late_weight)
    stride = n_slots + 1

    for i in range(n_slots + 1):
        k = n_allowing[i]
        if k == 0:
            break
        r = slice(0, k)
        nxt = i < n_stops[r]
        hp = _rows(has_p, k)
        t_in = t_p[i][r]
        arr_p = xp.where(hp, c["depart_prev"][r, i : i + 1] + t_in, c["depart_prev"][r, 0:1])
        ok_mid = (~hp | (arr_p <= _rows(p_latest, k))) & (hp | (i == 0))
        dep_p = xp.where(hp, xp.maximum(arr_p, _rows(ready, k)) + _rows(p_svc, k), arr_p)
        t_out = t_p[i + 1][r]
        # A virtual pickup (order on board) sits at the start and delays nothing.
        delta1 = xp.where(nxt & hp, xp.maximum((dep_p + t_out) - c["arrival"][r, i : i + 1], 0), 0)
        x1 = delta1 + c["cum_wait"][r, i : i + 1]
        travel_p = xp.where(nxt, (t_in + t_out) - c["leg"][r, i : i + 1], t_in)
        travel_p = xp.where(hp, travel_p, 0)
        t_in = xp.where(hp, t_in, 0)
        ok_mid = ok_mid & (~hp | (c["load_before"][r, i : i + 1] + _rows(size, k) <= cap[r]))
        run_soft = xp.zeros(x1.shape, f32)
        for j in range(i, n_slots + 1):
            k = n_allowing[j]
            if k == 0:
                break
            r = slice(0, k)
            x1, run_soft, ok_mid = x1[:k], run_soft[:k], ok_mid[:k]
            dep_p, travel_p, t_in = dep_p[:k], travel_p[:k], t_in[:k]
            if j == i:
                arr_d = dep_p + _rows(t_pd, k)
                travel = (t_in + _rows(t_pd, k)) + close[j][r]
            else:
                m = j - 1  # stop j-1 now lies between P and D
                run_soft = run_soft + xp.maximum(x1 - c["soft"][r, m : m + 1], 0)
                ok_mid = (
                    ok_mid
                    & (x1 <= c["hard"][r, m : m + 1])
                    & (
                        ~_rows(has_p, k)
                        | (c["load_before"][r, j : j + 1] + _rows(size, k) <= cap[r])
                    )
                )
                shift = xp.maximum(x1 - c["cum_wait"][r, j : j + 1], 0)
                arr_d = (c["depart_prev"][r, j : j + 1] + shift) + t_d[j][r]
                travel = (travel_p + t_d[j][r]) + close[j][r]
            # Service at D starts once it may (a Li & Lim delivery can have an earliest time).
            start_d = xp.maximum(arr_d, _rows(d_ready, k))
            x2 = xp.maximum(start_d - thr[j][r], 0) + c["cum_wait"][r, j : j + 1]
            ok = ok_mid & (arr_d <= _rows(d_latest, k)) & (x2 <= c["hard_min"][r, j : j + 1])
            late = run_soft + xp.maximum(arr_d - _rows(due, k), 0)
            cost = xp.where(ok, travel + w * late, xp.inf)
            # Stops after D add lateness only past the suffix minimum; price those placements
            # exactly, but only where they could still beat the best found so far.
            need = (x2 > c["soft_min"][r, j : j + 1]) & (cost < best[r])
            if bool(need.any()):
                late = late + _suffix_lateness(xp, need, x2, c["soft"][r], j)
                cost = xp.where(ok, travel + w * late, xp.inf)
            better = cost < best[r]
            xp.copyto(best[r], cost, where=better)
            xp.copyto(best_code[r], i * stride + j, where=better)
            xp.copyto(best_late[r], late, where=better)
            xp.copyto(best_arr[r], arr_d, where=better)

    inv = xp.empty_like(perm)
    inv[perm] = xp.arange(n_routes, dtype=perm.dtype)
    best, best_code, best_late, best_arr = best[inv], best_code[inv], best_late[inv], best_arr[inv]
    found = best_code >= 0
    return Insertions(
        cost=best.reshape(out_shape),
        pickup_pos=xp.where(found, best_code // stride, -1).astype(xp.int32).reshape(out_shape),
        dropoff_pos=xp.where(found, best_code % stride, -1).astype(xp.int32).reshape(out_shape),
        travel=xp.where(found, best - w * best_late, 0).astype(f32).reshape(out_shape),
        lateness=best_late.reshape(out_shape),
        dropoff_arrival=best_arr.reshape(out_shape),
    )


def _suffix_lateness(xp: Any, need: Any, x2: Any, soft: Any, j: int) -> Any:
    """Sum over stops m >= j of max(0, x2 - soft[m]) where ``need``, else 0.

    need : bool[k, O'], x2 : float32[k, O'], soft : float32[k, L+1].
    """
    out = xp.zeros(x2.shape, xp.float32)
    rows, cols = xp.nonzero(need)
    x = x2[rows, cols]
    acc = xp.zeros(x.shape, xp.float32)
    for m in range(j, soft.shape[1] - 1):
        acc = acc + xp.maximum(x - soft[rows, m], 0)
    out[rows, cols] = acc
    return out
