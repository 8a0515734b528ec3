"""Editing routes as arrays: insert an order's stops, remove an order's stops.

Each route's stops carry an owner key (``int32[R, L]``, the order they belong to; -1 for padding
and for fixed stops such as a depot end). Edits are gathers over slot indices, vectorised over
the edited rows and the same for NumPy and CuPy.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kernels import compiled
from kernels.arrays import STOP_ARRAYS, OrderArrays, RouteArrays, empty_stops


def _grow(routes: RouteArrays, owner: Any, n_slots: int) -> tuple[RouteArrays, Any]:
    """Pad every route to at least ``n_slots`` slots."""
    xp = routes.xp
    have = routes.shape[1]
    if have >= n_slots:
        return routes, owner
    extra = n_slots - have
    pad = empty_stops(routes.shape[0], extra, xp)
    grown = {
        name: xp.concatenate([getattr(routes, name), pad[name]], axis=1) for name in STOP_ARRAYS
    }
    owner = xp.concatenate([owner, xp.full((owner.shape[0], extra), -1, owner.dtype)], axis=1)
    return replace(routes, **grown), owner


def insert_orders(
    routes: RouteArrays,
    owner: Any,
    rows: Any,
    orders: OrderArrays,
    pickup_pos: Any,
    dropoff_pos: Any,
    keys: Any,
    method: str = "auto",
    n_slots: int | None = None,
    order_index: Any = None,
) -> tuple[RouteArrays, Any]:
    """Insert order k (of ``orders``) into route ``rows[k]`` at (pickup_pos[k], dropoff_pos[k]).

    rows : int[K], distinct route indices; orders : K orders, or with ``order_index`` (int[K])
    any number of them, ``orders[order_index[k]]`` going into route ``rows[k]`` (on a GPU the
    kernel reads them where they are); positions : int[K] as returned by
    ``insertion_costs`` (in the route before the edit); keys : int[K] owner keys for the new stops.
    method : "auto" (for CuPy the CUDA kernel, ``route_edit.cu``: one launch, a thread per
        edited route; for NumPy its compiled CPU twin, ``_route_edit_jit``, or the array code
        while the compiled builds warm), "cuda" (CuPy), "jit" (NumPy) or "loop" (the array
        code, any ``xp``). All give the same arrays.
    n_slots : how wide the routes grow, ``max(n_stops[rows]) + 2`` (a caller that knows it
        saves a read from the device); None reads it.
    An order without a pickup gets only its drop-off. Returns new (routes, owner), grown by up to
    two slots; the input arrays are not modified. Raises ValueError for an unknown method or
    one that does not run on the inputs' device.
    """
    xp = routes.xp
    if method == "auto":
        method = ("loop" if compiled.warming() else "jit") if xp is np else "cuda"
    if method not in ("loop", "jit", "cuda"):
        raise ValueError(f"unknown method {method!r}: expected 'auto', 'cuda', 'jit' or 'loop'")
    if method == "cuda" and xp is np:
        raise ValueError("method 'cuda' runs on CuPy arrays only")
    if method == "jit" and xp is not np:
        raise ValueError("method 'jit' runs on NumPy arrays only")
    if int(rows.shape[0]) == 0:
        return routes, owner
    if n_slots is None:  # a read from the device (one scalar): it sizes the new arrays
        n_slots = int((routes.n_stops[rows] + 2).max())
    grown = routes.shape[1] < n_slots
    routes, owner = _grow(routes, owner, n_slots)
    if method != "loop":  # one pass a route: the kernel, or its compiled twin
        if order_index is None:
            order_index = xp.arange(int(rows.shape[0]))
        if method == "cuda":
            from kernels._route_edit_cuda import insert_orders_cuda as edit
        else:
            from kernels._route_edit_jit import insert_orders_jit as edit
        return edit(
            routes, owner, rows, orders, order_index, pickup_pos, dropoff_pos, keys, fresh=grown
        )
    if order_index is not None:
        orders = orders.take(order_index)
    n_slots = routes.shape[1]
    has_p = orders.has_pickup
    i = xp.where(has_p, pickup_pos, n_slots + 1)[:, None]  # no pickup: a slot never reached
    d_at = xp.where(has_p, dropoff_pos + 1, dropoff_pos)[:, None]
    s = xp.arange(n_slots)[None, :]
    src = xp.clip(s - (s > i) - (s > d_at), 0, n_slots - 1)
    is_p, is_d = s == i, s == d_at
    r = rows[:, None]

    def merge(old: Any, p_val: Any, d_val: Any) -> Any:
        picked = old[r, src]
        extra = (slice(None), slice(None)) + (None,) * (old.ndim - 2)
        return xp.where(is_p[extra], p_val, xp.where(is_d[extra], d_val, picked))

    size = orders.size[:, None]
    new_vals = {
        "stop_xy": merge(
            routes.stop_xy, orders.pickup_xy[:, None, :], orders.dropoff_xy[:, None, :]
        ),
        "stop_ready": merge(
            routes.stop_ready, orders.ready[:, None], orders.dropoff_ready[:, None]
        ),
        "stop_due": merge(routes.stop_due, xp.inf, orders.due[:, None]),
        "stop_latest": merge(
            routes.stop_latest, orders.pickup_latest[:, None], orders.dropoff_latest[:, None]
        ),
        "stop_service": merge(
            routes.stop_service, orders.pickup_service[:, None], orders.dropoff_service[:, None]
        ),
        "stop_load": merge(routes.stop_load, size, -size),
    }
    out = {name: getattr(routes, name).copy() for name in new_vals}
    for name, val in new_vals.items():
        out[name][rows] = val.astype(out[name].dtype)
    new_owner = owner.copy()
    new_owner[rows] = xp.where(is_p | is_d, keys[:, None], owner[r, src]).astype(owner.dtype)
    added = xp.where(has_p, 2, 1).astype(xp.int32)
    n_stops = routes.n_stops.copy()
    n_stops[rows] += added
    limit = routes.insert_limit.copy()
    limit[rows] += added
    # Slots past the end hold padding values again.
    used = xp.arange(n_slots)[None, :] < n_stops[:, None]
    pad = empty_stops(1, n_slots, xp)
    for name in new_vals:
        fill = pad[name]
        out[name] = xp.where(used[(...,) + (None,) * (out[name].ndim - 2)], out[name], fill)
    new_owner = xp.where(used, new_owner, -1)
    return replace(routes, n_stops=n_stops, insert_limit=limit, **out).check(), new_owner


def remove_orders(routes: RouteArrays, owner: Any, keys: Any) -> tuple[RouteArrays, Any]:
    """Route k without the stops of order ``keys[k]`` (K = number of routes, one key each).

    Stops after a removed one move up; a fixed end stays the last stop. Returns new arrays.
    """
    xp = routes.xp
    n_routes, n_slots = routes.shape
    drop = (owner == keys[:, None]) & (keys[:, None] >= 0)
    r = xp.arange(n_routes)[:, None]
    # Kept slots first, in order, then the removed ones: a stable argsort of ``drop``, built
    # from running counts (a sort of a boolean per row costs ten times more).
    kept = ~drop
    n_kept = kept.sum(axis=1, keepdims=True)
    target = xp.where(kept, xp.cumsum(kept, axis=1) - 1, n_kept + xp.cumsum(drop, axis=1) - 1)
    keep_order = xp.empty_like(target)
    keep_order[r, target] = xp.arange(n_slots)[None, :]
    n_removed = drop.sum(axis=1).astype(xp.int32)
    n_stops = routes.n_stops - n_removed
    used = xp.arange(n_slots)[None, :] < n_stops[:, None]
    pad = empty_stops(1, n_slots, xp)
    out = {}
    for name in STOP_ARRAYS:
        a = getattr(routes, name)[r, keep_order]
        mask = used[(...,) + (None,) * (a.ndim - 2)]
        out[name] = xp.where(mask, a, pad[name])
    new_owner = xp.where(used, owner[r, keep_order], -1)
    return (
        replace(
            routes,
            n_stops=n_stops.astype(xp.int32),
            insert_limit=(routes.insert_limit - n_removed).astype(xp.int32),
            **out,
        ).check(),
        new_owner,
    )


def orders_on_routes(routes: RouteArrays, owner: Any, keys: Any) -> OrderArrays:
    """The order behind key ``keys[k]`` on route k, rebuilt from its stops (K routes).

    Raises ValueError if a key has no drop-off on its route.
    """
    xp = routes.xp
    n_routes = routes.shape[0]
    is_mine = owner == keys[:, None]
    is_pick = is_mine & (routes.stop_load > 0)
    is_drop = is_mine & (routes.stop_load < 0)
    if not bool(is_drop.any(axis=1).all()):
        raise ValueError("every key must own a drop-off on its route")
    p_slot = xp.argmax(is_pick, axis=1)
    d_slot = xp.argmax(is_drop, axis=1)
    r = xp.arange(n_routes)
    has_p = is_pick.any(axis=1)
    f = xp.float32
    return OrderArrays(
        pickup_xy=xp.where(has_p[:, None], routes.stop_xy[r, p_slot], 0).astype(f),
        dropoff_xy=routes.stop_xy[r, d_slot].astype(f),
        ready=xp.where(has_p, routes.stop_ready[r, p_slot], -xp.inf).astype(f),
        pickup_latest=xp.where(has_p, routes.stop_latest[r, p_slot], xp.inf).astype(f),
        due=routes.stop_due[r, d_slot].astype(f),
        dropoff_latest=routes.stop_latest[r, d_slot].astype(f),
        dropoff_ready=routes.stop_ready[r, d_slot].astype(f),
        pickup_service=xp.where(has_p, routes.stop_service[r, p_slot], 0).astype(f),
        dropoff_service=routes.stop_service[r, d_slot].astype(f),
        size=(-routes.stop_load[r, d_slot]).astype(f),
        has_pickup=has_p,
    ).check()


def put_rows(
    routes: RouteArrays, owner: Any, rows: Any, sub: RouteArrays, sub_owner: Any
) -> tuple[RouteArrays, Any]:
    """``routes`` with rows ``rows`` replaced by the rows of ``sub`` (slots padded to match)."""
    width = max(routes.shape[1], sub.shape[1])
    routes, owner = _grow(routes, owner, width)
    sub, sub_owner = _grow(sub, sub_owner, width)
    out = {}
    for name in RouteArrays.__dataclass_fields__:
        a = getattr(routes, name).copy()
        a[rows] = getattr(sub, name)
        out[name] = a
    new_owner = owner.copy()
    new_owner[rows] = sub_owner
    return RouteArrays(**out).check(), new_owner
