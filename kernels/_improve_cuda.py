"""The CuPy launcher of ``improve.cu`` (imported only when CuPy inputs arrive): every route's
relocation search in one launch, one thread per route.

The kernel is compiled with ``insertion_costs.cu`` before it (whose pricing and route context it
calls), and its arguments are bound by name from its own parameter list, as the pricing
kernel's are.
"""

from __future__ import annotations

import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernels._insertion_costs_cuda import NVRTC_OPTIONS
from kernels.arrays import STOP_ARRAYS, RouteArrays

IMPROVE_SOURCE = Path(__file__).with_name("improve.cu")
KERNEL_NAME = "orml_improve"
_BLOCK = 64


def source() -> str:
    """``insertion_costs.cu`` then ``improve.cu``: one translation unit."""
    from kernels.insertion_types import CUDA_SOURCE

    return CUDA_SOURCE.read_text() + "\n" + IMPROVE_SOURCE.read_text()


@lru_cache(maxsize=1)
def kernel_parameters() -> tuple[str, ...]:
    """Parameter names of ``orml_improve`` in the ``.cu`` source, in order."""
    match = re.search(
        rf"__global__\s+void\s+{KERNEL_NAME}\s*\(([^)]*)\)", IMPROVE_SOURCE.read_text()
    )
    if match is None:
        raise RuntimeError(f"{IMPROVE_SOURCE} has no __global__ {KERNEL_NAME}")
    return tuple(p.split()[-1].lstrip("*") for p in match.group(1).split(","))


@lru_cache(maxsize=1)
def _kernel() -> Any:
    import cupy

    return cupy.RawModule(code=source(), options=NVRTC_OPTIONS).get_function(KERNEL_NAME)


def launch_values(
    routes: RouteArrays,
    owner: Any,
    rows: Any,
    late_weight: float,
    max_passes: int,
    tol_s: float,
    xp: Any,
) -> dict[str, Any]:
    """Every argument of ``orml_improve`` by name (any ``xp``, so that the names are checked on
    machines without a GPU): the edited arrays are fresh copies, the scratch uninitialised."""
    f32, i32 = xp.float32, xp.int32
    rows = xp.ascontiguousarray(rows, xp.int64)
    n_rows, n_slots = int(rows.shape[0]), routes.shape[1]

    def rows_of(*shape: int, dtype: Any = f32) -> Any:
        return xp.empty((n_rows, *shape), dtype)

    c = xp.ascontiguousarray
    values: dict[str, Any] = {
        "rows": rows,
        "n_rows": i32(n_rows),
        "n_slots": i32(n_slots),
        **{
            name: c(getattr(routes, name))
            for name in (
                "start_xy",
                "start_time",
                "speed",
                "capacity",
                "load0",
                "n_stops",
                "insert_limit",
            )
        },
        **{name: xp.array(getattr(routes, name), copy=True) for name in STOP_ARRAYS},
        "owner": xp.array(owner, i32, copy=True),
        "late_weight": f32(late_weight),
        "max_passes": i32(max_passes),
        "tol": f32(tol_s),
        "moves": xp.zeros(n_rows, i32),
    }
    for prefix in ("red", "new"):
        values[f"{prefix}_xy"] = rows_of(n_slots, 2)
        for name in ("ready", "due", "latest", "service", "load"):
            values[f"{prefix}_{name}"] = rows_of(n_slots)
        values[f"{prefix}_owner"] = rows_of(n_slots, dtype=i32)
    values["ctx_node_xy"] = rows_of(n_slots + 2, 2)
    for name in (
        "depart_prev",
        "leg",
        "arrival",
        "cum_wait",
        "soft",
        "hard",
        "soft_min",
        "hard_min",
        "load_before",
    ):
        values[f"ctx_{name}"] = rows_of(n_slots + 1)
    return values


def improve_cuda(
    routes: RouteArrays,
    owner: Any,
    rows: Any,
    late_weight: float,
    max_passes: int,
    tol_s: float,
) -> tuple[RouteArrays, Any, Any]:
    """``improve`` for CuPy arrays (checked): new (routes, owner, moves), one launch; moves
    is a 0-d device array."""
    import cupy

    values = launch_values(routes, owner, rows, late_weight, max_passes, tol_s, cupy)
    n_rows = int(values["n_rows"])
    if n_rows:
        args = tuple(values[name] for name in kernel_parameters())
        _kernel()(((n_rows + _BLOCK - 1) // _BLOCK,), (_BLOCK,), args)
    edited = {name: values[name] for name in STOP_ARRAYS}
    # The count stays on the device: reading it is a sync the round does not need.
    return replace(routes, **edited), values["owner"], values["moves"].sum()
