"""The CPU twin of ``schedule``'s loop over stop slots, compiled by Numba.

``schedule`` walks the ``L`` slots in Python, a dozen array calls each, vectorised over the
``R`` routes: a served 100 x 20 round calls it six times (the routes before the round, the
improvement's passes, the plan), about a third of the solve. Here one loop per route goes only
through the stops it has. Every operation is ``schedule``'s in float32 and in the same order
(no fast-math, so LLVM neither fuses the multiply-add nor reorders; ``error_model="numpy"``), so
``tests/kernels/test_schedule.py`` holds the two bit-equal. What follows the loop (lateness,
load, feasibility) stays the array code both paths share.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kernels._insertion_costs_jit import _read_only, _travel
from kernels.arrays import RouteArrays

_F0 = np.float32(0.0)


@njit(cache=True, nogil=True, error_model="numpy")
def _walk(  # pragma: no cover - compiled
    start_xy,
    start_time,
    speed,
    n_stops,
    stop_xy,
    stop_ready,
    stop_service,
    arrival,
    departure,
    travel,
    t_end,
):
    for r in range(start_time.shape[0]):
        t = start_time[r]
        hx = start_xy[r, 0]
        hy = start_xy[r, 1]
        driven = _F0
        for q in range(n_stops[r]):
            sx = stop_xy[r, q, 0]
            sy = stop_xy[r, q, 1]
            leg = _travel(sx, sy, hx, hy, speed[r])
            arr = t + leg
            ready = stop_ready[r, q]
            # np.maximum: NaN if either is NaN
            later = arr if (arr >= ready or arr != arr) else ready
            dep = later + stop_service[r, q]
            arrival[r, q] = arr
            departure[r, q] = dep
            driven = driven + leg
            t = dep
            hx = sx
            hy = sy
        travel[r] = driven
        t_end[r] = t


def walk_jit(routes: RouteArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``schedule``'s loop for NumPy arrays (already checked): arrival, departure float32[R, L]
    (NaN past each route's stops), travel float32[R] (s driven) and the time each route's last
    stop is left, float32[R] (its start time when it has none)."""
    n_routes, n_slots = routes.shape
    arrival = np.full((n_routes, n_slots), np.nan, np.float32)
    departure = np.full((n_routes, n_slots), np.nan, np.float32)
    travel = np.empty(n_routes, np.float32)
    t_end = np.empty(n_routes, np.float32)
    c = _read_only
    _walk(
        c(routes.start_xy),
        c(routes.start_time),
        c(routes.speed),
        c(routes.n_stops),
        c(routes.stop_xy),
        c(routes.stop_ready),
        c(routes.stop_service),
        arrival,
        departure,
        travel,
        t_end,
    )
    return arrival, departure, travel, t_end


def warm_up() -> None:
    """Compile (or load from the on-disk cache) the build, so no request pays for it."""
    walk_jit(RouteArrays.empty(1, 1))
