"""The CuPy launcher of ``route_edit.cu`` (imported only when CuPy inputs arrive): the orders'
stops inserted into their routes in one launch, a thread per edited route, instead of some
sixty array operations."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernels._insertion_costs_cuda import NVRTC_OPTIONS
from kernels.arrays import STOP_ARRAYS, OrderArrays, RouteArrays

SOURCE = Path(__file__).with_name("route_edit.cu")
KERNEL_NAME = "orml_insert_orders"
_BLOCK = 128


@lru_cache(maxsize=1)
def kernel_parameters() -> tuple[str, ...]:
    """Parameter names of ``orml_insert_orders`` in the ``.cu`` source, in order."""
    match = re.search(rf"__global__\s+void\s+{KERNEL_NAME}\s*\(([^)]*)\)", SOURCE.read_text())
    if match is None:
        raise RuntimeError(f"{SOURCE} has no __global__ {KERNEL_NAME}")
    return tuple(p.split()[-1].lstrip("*") for p in match.group(1).split(","))


@lru_cache(maxsize=1)
def _kernel() -> Any:
    import cupy

    return cupy.RawModule(code=SOURCE.read_text(), options=NVRTC_OPTIONS).get_function(KERNEL_NAME)


def launch_values(
    routes: RouteArrays,
    owner: Any,
    rows: Any,
    orders: OrderArrays,
    order_index: Any,
    pickup_pos: Any,
    dropoff_pos: Any,
    keys: Any,
    xp: Any,
    fresh: bool = False,
) -> dict[str, Any]:
    """Every argument of ``orml_insert_orders`` by name (any ``xp``, so that the names are
    checked on machines without a GPU): the edited arrays are copies of ``routes`` (already
    wide enough) and ``owner``, or, where they are ``fresh`` (just grown: nobody else holds
    them), those arrays themselves."""
    c = xp.ascontiguousarray
    return {
        "rows": c(rows, xp.int64),
        "order_of": c(order_index, xp.int64),
        "n_rows": xp.int32(rows.shape[0]),
        "n_slots": xp.int32(routes.shape[1]),
        **{name: xp.array(getattr(routes, name), copy=not fresh) for name in STOP_ARRAYS},
        "owner": xp.array(owner, xp.int32, copy=not fresh),
        "n_stops": xp.array(routes.n_stops, copy=True),
        "insert_limit": xp.array(routes.insert_limit, copy=True),
        **{name: c(getattr(orders, name)) for name in OrderArrays.__dataclass_fields__},
        "pickup_pos": c(pickup_pos, xp.int32),
        "dropoff_pos": c(dropoff_pos, xp.int32),
        "keys": c(keys, xp.int32),
    }


def insert_orders_cuda(
    routes: RouteArrays,
    owner: Any,
    rows: Any,
    orders: OrderArrays,
    order_index: Any,
    pickup_pos: Any,
    dropoff_pos: Any,
    keys: Any,
    fresh: bool = False,
) -> tuple[RouteArrays, Any]:
    """``route_edit.insert_orders`` for CuPy arrays, routes already grown (``fresh``: the
    stop arrays and owner are new, edited in place), ``orders[order_index[k]]`` into route
    ``rows[k]``: new (routes, owner), one launch."""
    import cupy

    values = launch_values(
        routes, owner, rows, orders, order_index, pickup_pos, dropoff_pos, keys, cupy, fresh=fresh
    )
    n_rows = int(rows.shape[0])
    args = tuple(values[name] for name in kernel_parameters())
    _kernel()(((n_rows + _BLOCK - 1) // _BLOCK,), (_BLOCK,), args)
    edited = {name: values[name] for name in (*STOP_ARRAYS, "n_stops", "insert_limit")}
    return replace(routes, **edited).check(), values["owner"]
