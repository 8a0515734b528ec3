"""The insertion kernels' result and per-route context types, shared by the three builds.

``insertion_costs.py`` (array loop and dispatcher), ``_insertion_costs_jit.py`` (Numba twin) and
``_insertion_costs_cuda.py`` (CUDA launcher) all build these; they live here so that none of the
three imports another for its types.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

CUDA_SOURCE = Path(__file__).with_name("insertion_costs.cu")


@dataclass(frozen=True)
class Insertions:
    """Best placements; shape [R, O] (grid) or [P] (pairs).

    cost : float32  weighted seconds; +inf when no placement is feasible.
    pickup_pos, dropoff_pos : int32  i and j in the original route (see module doc); -1 when
        infeasible. For an order without a pickup, pickup_pos is 0.
    travel : float32  added driving time of the best placement, seconds.
    lateness : float32  added lateness of the best placement, seconds.
    dropoff_arrival : float32  planned arrival at the new drop-off, seconds (0 if infeasible).
    """

    cost: Any
    pickup_pos: Any
    dropoff_pos: Any
    travel: Any
    lateness: Any
    dropoff_arrival: Any


@dataclass(frozen=True)
class RouteContext:
    """Per-route facts every placement reads (positions q = 0..L; slot L is padding).

    node_xy : float32[R, L+2, 2]  node 0 is the start, node q+1 is stop q, the rest padding.
    depart_prev : float32[R, L+1]  departure from the node before position q.
    leg : float32[R, L+1]  driving time node q -> stop q (0 where there is no stop q).
    arrival : float32[R, L+1]  arrival at stop q (+inf where there is none).
    cum_wait : float32[R, L+1]  C[q], waiting before stop q.
    soft : float32[R, L+1]  T[q] (module doc); +inf for stops without a due time and padding.
    hard : float32[R, L+1]  H[q]; +inf for stops without a hard deadline and padding.
    soft_min, hard_min : float32[R, L+1]  suffix minima of soft and hard from q.
    load_before : float32[R, L+1]  load on the leg into position q.
    """

    node_xy: Any
    depart_prev: Any
    leg: Any
    arrival: Any
    cum_wait: Any
    soft: Any
    hard: Any
    soft_min: Any
    hard_min: Any
    load_before: Any


def context_buffers(xp: Any, n_routes: int, n_slots: int) -> dict[str, Any]:
    """Zeroed float32 arrays for every ``RouteContext`` field, which the compiled and CUDA
    builds fill in place: node_xy [R, L+2, 2], the rest [R, L+1]."""
    f32 = xp.float32
    return {
        name: xp.zeros(
            (n_routes, n_slots + 2, 2) if name == "node_xy" else (n_routes, n_slots + 1), f32
        )
        for name in RouteContext.__dataclass_fields__
    }
