"""The CPU twin of ``improve.cu``: every route's relocation search in one compiled call.

``improve``'s array loop runs a pass as some forty array calls over all candidate moves at once
(remove each order, re-price it, re-simulate, pick per route): on a CPU that is a few copies
of the routes per pass, on a GPU hundreds of small launches. A route's search depends on no
other route, so here one ``prange`` iteration (one CUDA thread in ``improve.cu``) runs a
route's whole search, every pass, on that route's own stops:

* its cost now (``_route_cost``: the schedule walk, then lateness summed stop by stop);
* for each drop-off on it, the route without that order (``_remove``), that route's cost and
  context (``_context_all``), and the order's cheapest re-insertion (``_price_serial``, pair
  mode): the gain is the cost now less both;
* the best gain (ties: the later drop-off, as the array loop's stable sort), applied when it
  passes ``tol`` and the re-simulated route is cheaper by ``tol / 2``.

Operations are float32 and in the same order as the CUDA twin's (no fast-math), so the tests
hold the two bit-equal. Against the array loop the moves are the same up to rounding: that loop
sums a route's lateness with NumPy's pairwise sum (CuPy's with a tree), here it is summed in
slot order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numba import njit, prange

from kernels._insertion_costs_jit import _context_all, _pos, _price_serial, _read_only, _travel
from kernels._jit_builds import serial_and_parallel
from kernels.arrays import STOP_ARRAYS, RouteArrays

_F0 = np.float32(0.0)
_INF = np.float32(np.inf)


@njit(cache=True, inline="always", error_model="numpy")
def _route_cost(  # pragma: no cover - compiled
    sx0, sy0, t0, speed, n, stop_xy, stop_ready, stop_due, stop_service, late_weight
):
    """travel + late_weight x lateness of one route's first n stops (``schedule``'s walk)."""
    t = t0
    hx = sx0
    hy = sy0
    driven = _F0
    late = _F0
    for q in range(n):
        sx = stop_xy[q, 0]
        sy = stop_xy[q, 1]
        leg = _travel(sx, sy, hx, hy, speed)
        arr = t + leg
        ready = stop_ready[q]
        later = arr if (arr >= ready or arr != arr) else ready
        t = later + stop_service[q]
        driven = driven + leg
        late = late + _pos(arr - stop_due[q])
        hx = sx
        hy = sy
    return driven + late_weight * late


@njit(cache=True, inline="always", error_model="numpy")
def _remove(  # pragma: no cover - compiled
    n,
    key,
    owner,
    xy,
    ready,
    due,
    latest,
    service,
    load,
    o_xy,
    o_ready,
    o_due,
    o_latest,
    o_service,
    o_load,
    o_owner,
):
    """Copy the route's first n stops without those of ``key`` into the ``o_`` arrays
    (padding after); returns how many stops are left."""
    m = 0
    for q in range(n):
        if owner[q] == key:
            continue
        o_xy[m, 0] = xy[q, 0]
        o_xy[m, 1] = xy[q, 1]
        o_ready[m] = ready[q]
        o_due[m] = due[q]
        o_latest[m] = latest[q]
        o_service[m] = service[q]
        o_load[m] = load[q]
        o_owner[m] = owner[q]
        m += 1
    for q in range(m, owner.shape[0]):
        o_xy[q, 0] = _F0
        o_xy[q, 1] = _F0
        o_ready[q] = -_INF
        o_due[q] = _INF
        o_latest[q] = _INF
        o_service[q] = _F0
        o_load[q] = _F0
        o_owner[q] = -1
    return m


@njit(cache=True, inline="always", error_model="numpy")
def _insert(  # pragma: no cover - compiled
    m, i, j, key, red, mov, k, new
):
    """Route ``red`` (row k, m stops) with the moving order (row k of ``mov``) put back at
    pickup position i and drop-off position j (``route_edit.insert_orders``), into ``new``
    (row k); returns its number of stops."""
    r_xy, r_ready, r_due, r_latest, r_service, r_load, r_owner, _, _ = red
    pxy, dxy, ready, p_latest, due, d_latest, d_ready, p_svc, d_svc, size, has_p = mov
    n_xy, n_ready, n_due, n_latest, n_service, n_load, n_owner = new
    hp = has_p[k]
    d_at = j + 1 if hp else j
    total = m + 2 if hp else m + 1
    src = 0
    for q in range(total):
        if hp and q == i:
            n_xy[k, q, 0] = pxy[k, 0]
            n_xy[k, q, 1] = pxy[k, 1]
            n_ready[k, q] = ready[k]
            n_due[k, q] = _INF
            n_latest[k, q] = p_latest[k]
            n_service[k, q] = p_svc[k]
            n_load[k, q] = size[k]
            n_owner[k, q] = key
        elif q == d_at:
            n_xy[k, q, 0] = dxy[k, 0]
            n_xy[k, q, 1] = dxy[k, 1]
            n_ready[k, q] = d_ready[k]
            n_due[k, q] = due[k]
            n_latest[k, q] = d_latest[k]
            n_service[k, q] = d_svc[k]
            n_load[k, q] = -size[k]
            n_owner[k, q] = key
        else:
            n_xy[k, q, 0] = r_xy[k, src, 0]
            n_xy[k, q, 1] = r_xy[k, src, 1]
            n_ready[k, q] = r_ready[k, src]
            n_due[k, q] = r_due[k, src]
            n_latest[k, q] = r_latest[k, src]
            n_service[k, q] = r_service[k, src]
            n_load[k, q] = r_load[k, src]
            n_owner[k, q] = r_owner[k, src]
            src += 1
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def _relocation(  # pragma: no cover - compiled
    r, k, s, key, now, routes, owner, late_weight, red, ctx, mov, out, no_pairs
):
    """The gain of taking order ``key`` (its drop-off at slot s) off route r and putting it
    back at its cheapest place, float32; -inf where no place is feasible. Leaves the route
    without the order in row k of ``red``, its context in ``ctx``, the order in ``mov`` and
    the place in ``out`` (pair mode ``Insertions`` fields, row k)."""
    (
        start_xy,
        start_time,
        speed,
        capacity,
        load0,
        n_stops,
        insert_limit,
        stop_xy,
        stop_ready,
        stop_due,
        stop_latest,
        stop_service,
        stop_load,
    ) = routes
    r_xy, r_ready, r_due, r_latest, r_service, r_load, r_owner, r_n, r_limit = red
    pxy, dxy, ready, p_latest, due, d_latest, d_ready, p_svc, d_svc, size, has_p = mov
    n = n_stops[r]
    # The order, rebuilt from its stops (``route_edit.orders_on_routes``).
    p = -1
    for q in range(n):
        if owner[r, q] == key and stop_load[r, q] > _F0:
            p = q
            break
    hp = p >= 0
    has_p[k] = hp
    pxy[k, 0] = stop_xy[r, p, 0] if hp else _F0
    pxy[k, 1] = stop_xy[r, p, 1] if hp else _F0
    ready[k] = stop_ready[r, p] if hp else -_INF
    p_latest[k] = stop_latest[r, p] if hp else _INF
    p_svc[k] = stop_service[r, p] if hp else _F0
    dxy[k, 0] = stop_xy[r, s, 0]
    dxy[k, 1] = stop_xy[r, s, 1]
    due[k] = stop_due[r, s]
    d_latest[k] = stop_latest[r, s]
    d_ready[k] = stop_ready[r, s]
    d_svc[k] = stop_service[r, s]
    size[k] = -stop_load[r, s]
    m = _remove(
        n,
        key,
        owner[r],
        stop_xy[r],
        stop_ready[r],
        stop_due[r],
        stop_latest[r],
        stop_service[r],
        stop_load[r],
        r_xy[k],
        r_ready[k],
        r_due[k],
        r_latest[k],
        r_service[k],
        r_load[k],
        r_owner[k],
    )
    r_n[k] = m
    r_limit[k] = insert_limit[r] - (n - m)
    reduced = _route_cost(
        start_xy[r, 0],
        start_xy[r, 1],
        start_time[r],
        speed[r],
        m,
        r_xy[k],
        r_ready[k],
        r_due[k],
        r_service[k],
        late_weight,
    )
    one = slice(r, r + 1)
    kk = slice(k, k + 1)
    node, depart, leg, arrival, wait, soft, hard, soft_min, hard_min, load_before = ctx
    wait[k, 0] = _F0
    _context_all(
        start_xy[one],
        start_time[one],
        speed[one],
        load0[one],
        r_n[kk],
        r_xy[kk],
        r_ready[kk],
        r_due[kk],
        r_latest[kk],
        r_service[kk],
        r_load[kk],
        node[kk],
        depart[kk],
        leg[kk],
        arrival[kk],
        wait[kk],
        soft[kk],
        hard[kk],
        soft_min[kk],
        hard_min[kk],
        load_before[kk],
    )
    cost, travel, late, arr, best_i, best_j = out
    _price_serial(
        node[kk],
        depart[kk],
        leg[kk],
        arrival[kk],
        wait[kk],
        soft[kk],
        hard[kk],
        soft_min[kk],
        hard_min[kk],
        load_before[kk],
        speed[one],
        capacity[one],
        r_n[kk],
        r_limit[kk],
        pxy[kk],
        dxy[kk],
        ready[kk],
        p_latest[kk],
        due[kk],
        d_latest[kk],
        d_ready[kk],
        p_svc[kk],
        d_svc[kk],
        size[kk],
        has_p[kk],
        True,
        no_pairs,
        no_pairs,
        late_weight,
        cost[kk],
        travel[kk],
        late[kk],
        arr[kk],
        best_i[kk],
        best_j[kk],
    )
    gain = now - (reduced + cost[k])
    return gain if np.isfinite(gain) else -_INF


def _improve_all(  # pragma: no cover - compiled
    rows, routes, owner, late_weight, max_passes, tol, red, ctx, mov, out, new, moves
):
    """Routes ``rows`` improved in place (their stop arrays and ``owner``); moves[k] the
    relocations applied to route rows[k]. Scratch tuples ``red``, ``ctx``, ``mov``, ``out``
    and ``new`` have one row per entry of rows (``improve_jit``)."""
    (
        start_xy,
        start_time,
        speed,
        _,
        _,
        n_stops,
        _,
        stop_xy,
        stop_ready,
        stop_due,
        stop_latest,
        stop_service,
        stop_load,
    ) = routes
    n_xy, n_ready, n_due, n_latest, n_service, n_load, n_owner = new
    best_i, best_j = out[4], out[5]
    half_tol = tol / np.float32(2.0)
    no_pairs = np.zeros(0, np.int64)
    for k in prange(rows.shape[0]):
        r = np.int64(rows[k])
        n = n_stops[r]
        for _ in range(max_passes):
            now = _route_cost(
                start_xy[r, 0],
                start_xy[r, 1],
                start_time[r],
                speed[r],
                n,
                stop_xy[r],
                stop_ready[r],
                stop_due[r],
                stop_service[r],
                late_weight,
            )
            best = -_INF
            best_slot = -1
            at_i = -1
            at_j = -1
            for s in range(n):
                key = owner[r, s]
                if key < 0 or not stop_load[r, s] < _F0:
                    continue
                gain = _relocation(
                    r, k, s, key, now, routes, owner, late_weight, red, ctx, mov, out, no_pairs
                )
                if gain >= best:  # ties: the later drop-off, as the array loop's stable sort
                    best = gain
                    best_slot = s
                    at_i = best_i[k]
                    at_j = best_j[k]
            if best_slot < 0 or not best > tol:
                break
            key = owner[r, best_slot]
            _relocation(
                r,
                k,
                best_slot,
                key,
                now,
                routes,
                owner,
                late_weight,
                red,
                ctx,
                mov,
                out,
                no_pairs,
            )
            _insert(red[7][k], at_i, at_j, key, red, mov, k, new)
            after = _route_cost(
                start_xy[r, 0],
                start_xy[r, 1],
                start_time[r],
                speed[r],
                n,
                n_xy[k],
                n_ready[k],
                n_due[k],
                n_service[k],
                late_weight,
            )
            if not after < now - half_tol:
                break
            for q in range(n):
                stop_xy[r, q, 0] = n_xy[k, q, 0]
                stop_xy[r, q, 1] = n_xy[k, q, 1]
                stop_ready[r, q] = n_ready[k, q]
                stop_due[r, q] = n_due[k, q]
                stop_latest[r, q] = n_latest[k, q]
                stop_service[r, q] = n_service[k, q]
                stop_load[r, q] = n_load[k, q]
                owner[r, q] = n_owner[k, q]
            moves[k] += 1


# One route's search is thousands of operations: the pool pays from a few dozen routes on.
_improve_serial, _improve_parallel = serial_and_parallel(_improve_all, error_model="numpy")
PARALLEL_MIN_ROUTES = 32


def improve_jit(
    routes: RouteArrays,
    owner: np.ndarray,
    rows: np.ndarray,
    late_weight: float,
    max_passes: int,
    tol_s: float,
) -> tuple[RouteArrays, np.ndarray, int]:
    """``improve`` for NumPy arrays (already checked), compiled: new (routes, owner, moves)."""
    rows = np.ascontiguousarray(rows, np.int64)
    n_rows, n_slots = rows.shape[0], routes.shape[1]
    edited = {name: np.array(getattr(routes, name)) for name in STOP_ARRAYS}
    new_owner = np.array(owner, np.int32)
    f = np.float32

    def rows_of(*shape: int, dtype: type = f) -> np.ndarray:
        return np.zeros((n_rows, *shape), dtype)

    red = (
        rows_of(n_slots, 2),
        rows_of(n_slots),
        rows_of(n_slots),
        rows_of(n_slots),
        rows_of(n_slots),
        rows_of(n_slots),
        rows_of(n_slots, dtype=np.int32),
        rows_of(dtype=np.int32),
        rows_of(dtype=np.int32),
    )
    ctx = (rows_of(n_slots + 2, 2), *(rows_of(n_slots + 1) for _ in range(9)))
    mov = (
        rows_of(2),
        rows_of(2),
        *(rows_of() for _ in range(8)),
        rows_of(dtype=np.bool_),
    )
    out = (*(rows_of() for _ in range(4)), rows_of(dtype=np.int32), rows_of(dtype=np.int32))
    new = (
        *(rows_of(n_slots, 2),),
        *(rows_of(n_slots) for _ in range(5)),
        rows_of(n_slots, dtype=np.int32),
    )
    c = _read_only
    arrays = (
        c(routes.start_xy),
        c(routes.start_time),
        c(routes.speed),
        c(routes.capacity),
        c(routes.load0),
        c(routes.n_stops),
        c(routes.insert_limit),
        *edited.values(),
    )
    moves = np.zeros(n_rows, np.int64)
    run = _improve_parallel if n_rows >= PARALLEL_MIN_ROUTES else _improve_serial
    run(
        rows,
        arrays,
        new_owner,
        f(late_weight),
        max_passes,
        f(tol_s),
        red,
        ctx,
        mov,
        out,
        new,
        moves,
    )
    return replace(routes, **edited), new_owner, int(moves.sum())


def warm_up() -> None:
    """Compile (or load from the on-disk cache) both builds, so no request pays for it."""
    n = PARALLEL_MIN_ROUTES
    routes, owner = RouteArrays.empty(n, 1), np.full((n, 1), -1, np.int32)
    for rows in (np.zeros(1, np.int64), np.arange(n)):
        improve_jit(routes, owner, rows, 1.0, 2, 1e-2)
