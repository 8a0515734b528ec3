"""``schedule``: when every rider reaches every stop of its route.

One algorithm for NumPy and CuPy (``xp`` comes from the inputs): a loop over the ``L`` stop slots,
vectorised over the ``R`` routes; for CuPy inputs one CUDA thread walks each route instead
(``insertion_costs.cu``, ``orml_schedule_walk``: the launches, not the arithmetic, set the array
loop's time on a GPU). A rider leaves its start at ``start_time``, drives straight
lines at its speed, waits at a pickup until the food is ready, and spends each stop's service time.
For NumPy inputs the loop has a compiled twin (``kernels._schedule_jit``, bit-equal), used once
the compiled builds are loaded (``kernels.compiled``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels import compiled
from kernels.arrays import RouteArrays


@dataclass(frozen=True)
class Schedule:
    """Times along R routes of L slots (seconds since the round's now; NaN in padding slots).

    arrival : float32[R, L]  arrival at each stop.
    departure : float32[R, L]  arrival + waiting for the food + service.
    lateness : float32[R, L]  max(0, arrival - due); 0 where there is no due time.
    load : float32[R, L]  load on board after each stop.
    travel : float32[R]  total driving time, seconds.
    total_lateness : float32[R]  sum of ``lateness`` over the route.
    duration : float32[R]  from the start to the departure from the last stop (0 for no stops).
    feasible : bool[R]  every arrival within its hard deadline and the load within
        [0, capacity] (up to 1e-3 capacity units) all along.
    """

    arrival: Any
    departure: Any
    lateness: Any
    load: Any
    travel: Any
    total_lateness: Any
    duration: Any
    feasible: Any


def travel_time(a_xy: Any, b_xy: Any, speed: Any, xp: Any) -> Any:
    """Straight-line driving time, seconds: float32[..., 2] pairs of points, speed in m/s.

    Written as ``sqrt(dx*dx + dy*dy) / speed`` in float32, the same operations in the same order
    as the CUDA kernel, so the NumPy and CuPy paths round identically.
    """
    d = a_xy - b_xy
    return xp.sqrt(d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]) / speed


def schedule(routes: RouteArrays, method: str = "auto") -> Schedule:
    """Simulate every route. method : "auto" (for NumPy inputs the compiled loop unless it is
    still loading, see ``kernels.compiled``, else the array loop; for CuPy one CUDA thread per
    route), "jit" (NumPy only), "cuda" (CuPy only) or "loop" (any ``xp``). Raises ValueError on
    malformed arrays (see ``RouteArrays.check``) or an unknown method."""
    return _finish(routes, *_walked(routes, method))


def route_totals(routes: RouteArrays) -> tuple[Any, Any, Any]:
    """What a solve reads of ``schedule(routes)``: arrival float32[R, L], travel and total
    lateness float32[R], the same numbers, without the loads and the feasibility (on a GPU, a
    few device operations instead of some thirty). Raises as ``schedule``."""
    arrival, _, travel, _ = _walked(routes, "auto")
    late = _lateness(routes, arrival, _used(routes))
    return arrival, travel, late.sum(axis=1).astype(routes.xp.float32)


def _walked(routes: RouteArrays, method: str) -> tuple[Any, Any, Any, Any]:
    """The walk by ``method`` (``schedule``'s): arrival, departure, travel, last departure."""
    routes.check()
    xp = routes.xp
    if method == "auto":
        method = ("loop" if compiled.warming() else "jit") if xp is np else "cuda"
    if method == "loop":
        return _walk(routes)
    if method == "cuda":
        if xp is np:
            raise ValueError("method 'cuda' runs on CuPy arrays only")
        from kernels._insertion_costs_cuda import walk_cuda

        return walk_cuda(routes)
    if method != "jit":
        raise ValueError(f"unknown method {method!r}: expected 'auto', 'jit', 'cuda' or 'loop'")
    if xp is not np:
        raise ValueError("method 'jit' runs on NumPy arrays only")
    from kernels._schedule_jit import walk_jit

    return walk_jit(routes)


def _walk(routes: RouteArrays) -> tuple[Any, Any, Any, Any]:
    """The loop over slots, any ``xp``: arrival, departure [R, L], travel [R], the time each
    route's last stop is left [R]."""
    xp = routes.xp
    n_routes, n_slots = routes.shape
    f32 = xp.float32
    arrival = xp.full((n_routes, n_slots), xp.nan, f32)
    departure = xp.full((n_routes, n_slots), xp.nan, f32)
    t = routes.start_time.copy()
    here = routes.start_xy.copy()
    travel = xp.zeros(n_routes, f32)
    for q in range(n_slots):
        active = q < routes.n_stops
        leg = travel_time(routes.stop_xy[:, q], here, routes.speed, xp)
        arr = t + leg
        dep = xp.maximum(arr, routes.stop_ready[:, q]) + routes.stop_service[:, q]
        arrival[:, q] = xp.where(active, arr, xp.nan)
        departure[:, q] = xp.where(active, dep, xp.nan)
        travel = xp.where(active, travel + leg, travel)
        t = xp.where(active, dep, t)
        here = xp.where(active[:, None], routes.stop_xy[:, q], here)
    return arrival, departure, travel, t


def _used(routes: RouteArrays) -> Any:
    """bool[R, L]: the slots a route's stops fill."""
    return routes.xp.arange(routes.shape[1])[None, :] < routes.n_stops[:, None]


def _lateness(routes: RouteArrays, arrival: Any, used: Any) -> Any:
    """float32[R, L]: max(0, arrival - due) at each stop, 0 in padding (``used``: ``_used``)."""
    xp = routes.xp
    late = xp.where(used, xp.maximum(arrival - routes.stop_due, 0), 0)
    return late.astype(xp.float32)


def _finish(routes: RouteArrays, arrival: Any, departure: Any, travel: Any, t: Any) -> Schedule:
    xp = routes.xp
    f32 = xp.float32
    used = _used(routes)
    late = _lateness(routes, arrival, used)
    load = (routes.load0[:, None] + xp.cumsum(routes.stop_load, axis=1)).astype(f32)
    load = xp.where(used, load, xp.nan)
    tol = 1e-3
    in_time = xp.all(~used | (arrival <= routes.stop_latest), axis=1)
    in_load = xp.all(
        ~used | ((load >= -tol) & (load <= routes.capacity[:, None] + tol)), axis=1
    ) & (routes.load0 <= routes.capacity + tol)
    return Schedule(
        arrival=arrival,
        departure=departure,
        lateness=late,
        load=load,
        travel=travel,
        total_lateness=late.sum(axis=1).astype(f32),
        duration=(t - routes.start_time).astype(f32),
        feasible=in_time & in_load,
    )
