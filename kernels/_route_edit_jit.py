"""The CPU twin of ``route_edit.cu``, compiled by Numba: ``route_edit.insert_orders`` as one
loop per edited route, statement for statement the CUDA kernel's ``orml_insert_row``, reading
the arguments the CUDA launcher assembles (``_route_edit_cuda.launch_values``, by the ``.cu``
parameter names).

The array code (``method="loop"``) gathers each slot of every stop array through index arrays,
some sixty NumPy calls whatever the number of routes edited: about 0.4 ms for the handful of
routes a replayed MDRP round edits, a fifth of that replay's time. Here each edited route is one
pass over its slots. Only copies are made (no arithmetic on the values), so the three builds
give the same arrays bit for bit (``tests/kernels/test_route_edit.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
from numba import njit

from kernels._insertion_costs_jit import _read_only
from kernels._route_edit_cuda import kernel_parameters, launch_values
from kernels.arrays import STOP_ARRAYS, OrderArrays, RouteArrays

#: The launcher's arguments the loop writes (the rest are read-only inputs).
_EDITED = (*STOP_ARRAYS, "owner", "n_stops", "insert_limit")


@njit(cache=True, nogil=True)
def _insert_rows(  # pragma: no cover - compiled
    rows,
    order_of,
    n_rows,
    n_slots,
    stop_xy,
    stop_ready,
    stop_due,
    stop_latest,
    stop_service,
    stop_load,
    owner,
    n_stops,
    insert_limit,
    pickup_xy,
    dropoff_xy,
    ready,
    pickup_latest,
    due,
    dropoff_latest,
    dropoff_ready,
    pickup_service,
    dropoff_service,
    size,
    has_pickup,
    pickup_pos,
    dropoff_pos,
    keys,
):
    inf = np.float32(np.inf)
    for k in range(n_rows):
        r = rows[k]
        o = order_of[k]
        hp = has_pickup[o]
        i = pickup_pos[k] if hp else n_slots + 1  # no pickup: a slot never reached
        d = dropoff_pos[k] + 1 if hp else dropoff_pos[k]
        added = 2 if hp else 1
        n_new = n_stops[r] + added
        # From the last slot down: slot s reads slot s - (s > i) - (s > d) <= s of the route
        # before, which no earlier step has written (the array code's gather, in place).
        for s in range(n_slots - 1, -1, -1):
            if s >= n_new:  # padding, as kernels/arrays.py STOP_PADDING states it
                stop_xy[r, s, 0] = 0.0
                stop_xy[r, s, 1] = 0.0
                stop_ready[r, s] = -inf
                stop_due[r, s] = inf
                stop_latest[r, s] = inf
                stop_service[r, s] = 0.0
                stop_load[r, s] = 0.0
                owner[r, s] = -1
            elif s == i:
                stop_xy[r, s, 0] = pickup_xy[o, 0]
                stop_xy[r, s, 1] = pickup_xy[o, 1]
                stop_ready[r, s] = ready[o]
                stop_due[r, s] = inf
                stop_latest[r, s] = pickup_latest[o]
                stop_service[r, s] = pickup_service[o]
                stop_load[r, s] = size[o]
                owner[r, s] = keys[k]
            elif s == d:
                stop_xy[r, s, 0] = dropoff_xy[o, 0]
                stop_xy[r, s, 1] = dropoff_xy[o, 1]
                stop_ready[r, s] = dropoff_ready[o]
                stop_due[r, s] = due[o]
                stop_latest[r, s] = dropoff_latest[o]
                stop_service[r, s] = dropoff_service[o]
                stop_load[r, s] = -size[o]
                owner[r, s] = keys[k]
            else:
                src = s - (1 if s > i else 0) - (1 if s > d else 0)
                src = max(src, 0)
                stop_xy[r, s, 0] = stop_xy[r, src, 0]
                stop_xy[r, s, 1] = stop_xy[r, src, 1]
                stop_ready[r, s] = stop_ready[r, src]
                stop_due[r, s] = stop_due[r, src]
                stop_latest[r, s] = stop_latest[r, src]
                stop_service[r, s] = stop_service[r, src]
                stop_load[r, s] = stop_load[r, src]
                owner[r, s] = owner[r, src]
        n_stops[r] = n_new
        insert_limit[r] += added


def insert_orders_jit(
    routes: RouteArrays,
    owner: np.ndarray,
    rows: np.ndarray,
    orders: OrderArrays,
    order_index: np.ndarray,
    pickup_pos: np.ndarray,
    dropoff_pos: np.ndarray,
    keys: np.ndarray,
    fresh: bool = False,
) -> tuple[RouteArrays, np.ndarray]:
    """``route_edit.insert_orders`` for NumPy arrays, routes already grown (``fresh``: the
    stop arrays and owner are new, edited in place), ``orders[order_index[k]]`` into route
    ``rows[k]``: new (routes, owner)."""
    values: dict[str, Any] = launch_values(
        routes, owner, rows, orders, order_index, pickup_pos, dropoff_pos, keys, np, fresh=fresh
    )
    # One specialisation whether the inputs arrived read-only (a Ray replica's) or not.
    _insert_rows(
        *(
            values[n] if n in _EDITED or values[n].ndim == 0 else _read_only(values[n])
            for n in kernel_parameters()
        )
    )
    edited = {name: values[name] for name in (*STOP_ARRAYS, "n_stops", "insert_limit")}
    return replace(routes, **edited).check(), values["owner"]


def warm_up() -> None:
    """Compile (or load from the on-disk cache) the build, so no request pays for it."""
    fields = dict.fromkeys(OrderArrays.__dataclass_fields__, np.zeros(1, np.float32))
    fields |= {
        "pickup_xy": np.zeros((1, 2), np.float32),
        "dropoff_xy": np.zeros((1, 2), np.float32),
        "has_pickup": np.ones(1, np.bool_),
    }
    one, at = np.zeros(1, np.int64), np.zeros(1, np.int32)
    routes, owner = RouteArrays.empty(1, 2), np.full((1, 2), -1, np.int32)
    insert_orders_jit(routes, owner, one, OrderArrays(**fields), one, at, at, at)
