"""The CuPy launchers of ``insertion_costs.cu`` (imported only when CuPy inputs arrive): the
pricing kernel and the per-route walks (route context, schedule).

The kernel's arguments are bound by name: ``kernel_parameters`` reads the parameter list from the
``.cu`` source itself and ``launch_arguments`` supplies a value for each name, so the two files
cannot drift apart silently (a test checks the names on any machine, GPU or not).
"""

from __future__ import annotations

import re
from functools import lru_cache
from types import ModuleType
from typing import Any

from kernels.arrays import OrderArrays, RouteArrays

_BLOCK = 128
# No fused multiply-add: the kernel must round exactly like the NumPy loop.
NVRTC_OPTIONS = ("--fmad=false", "-std=c++14")
KERNEL_NAME = "orml_insertion_costs"


@lru_cache(maxsize=1)
def kernel_parameters() -> tuple[str, ...]:
    """Parameter names of ``orml_insertion_costs`` in the ``.cu`` source, in order."""
    from kernels.insertion_types import CUDA_SOURCE

    source = CUDA_SOURCE.read_text()
    match = re.search(rf"__global__\s+void\s+{KERNEL_NAME}\s*\(([^)]*)\)", source)
    if match is None:
        raise RuntimeError(f"{CUDA_SOURCE} has no __global__ {KERNEL_NAME}")
    return tuple(p.split()[-1].lstrip("*") for p in match.group(1).split(","))


def launch_arguments(
    routes: RouteArrays,
    orders: OrderArrays,
    ctx: Any,
    late_weight: float,
    pairs: bool,
    outputs: dict[str, Any],
    xp: ModuleType,
) -> list[Any]:
    """Kernel arguments in the ``.cu`` parameter order; KeyError names a missing one."""
    c = xp.ascontiguousarray
    values: dict[str, Any] = {
        **{name: c(getattr(ctx, name)) for name in ctx.__dataclass_fields__},
        **{
            name: c(getattr(routes, name))
            for name in ("speed", "capacity", "n_stops", "insert_limit")
        },
        "n_routes": xp.int32(routes.shape[0]),
        "n_slots": xp.int32(routes.shape[1]),
        **{name: c(getattr(orders, name)) for name in orders.__dataclass_fields__},
        "n_orders": xp.int32(len(orders)),
        "pairs": xp.int32(1 if pairs else 0),
        "late_weight": xp.float32(late_weight),
        **outputs,
    }
    return [values[name] for name in kernel_parameters()]


@lru_cache(maxsize=1)
def _module() -> Any:
    import cupy

    from kernels.insertion_types import CUDA_SOURCE

    return cupy.RawModule(code=CUDA_SOURCE.read_text(), options=NVRTC_OPTIONS)


def _kernel(name: str = KERNEL_NAME) -> Any:
    return _module().get_function(name)


def _per_route(n_routes: int) -> tuple[tuple[int], tuple[int]]:
    """Grid and block of a one-thread-per-route launch."""
    return ((n_routes + _BLOCK - 1) // _BLOCK,), (_BLOCK,)


def _route_inputs(routes: RouteArrays, names: tuple[str, ...], xp: ModuleType) -> list[Any]:
    c = xp.ascontiguousarray
    return [c(getattr(routes, name)) for name in names]


def route_context_cuda(routes: RouteArrays) -> Any:
    """``insertion_costs.route_context`` for CuPy arrays (checked), one thread per route: the
    same numbers as the array code, in one launch instead of a few per stop slot."""
    import cupy

    from kernels.insertion_types import RouteContext, context_buffers

    n_routes, n_slots = routes.shape
    out = context_buffers(cupy, n_routes, n_slots)
    if n_routes:
        inputs = _route_inputs(
            routes,
            (
                "start_xy",
                "start_time",
                "speed",
                "load0",
                "n_stops",
                "stop_xy",
                "stop_ready",
                "stop_due",
                "stop_latest",
                "stop_service",
                "stop_load",
            ),
            cupy,
        )
        args = (*inputs, cupy.int32(n_routes), cupy.int32(n_slots), *out.values())
        _kernel("orml_route_context")(*_per_route(n_routes), args)
    return RouteContext(**out)


def walk_cuda(routes: RouteArrays) -> tuple[Any, Any, Any, Any]:
    """``schedule``'s loop for CuPy arrays (checked), one thread per route: arrival, departure
    float32[R, L] (NaN past each route's stops), travel and the last departure float32[R]."""
    import cupy

    n_routes, n_slots = routes.shape
    f32 = cupy.float32
    arrival = cupy.full((n_routes, n_slots), cupy.nan, f32)
    departure = cupy.full((n_routes, n_slots), cupy.nan, f32)
    travel = cupy.empty(n_routes, f32)
    t_end = cupy.empty(n_routes, f32)
    if n_routes:
        inputs = _route_inputs(
            routes,
            ("start_xy", "start_time", "speed", "n_stops", "stop_xy", "stop_ready", "stop_service"),
            cupy,
        )
        args = (
            *inputs,
            cupy.int32(n_routes),
            cupy.int32(n_slots),
            arrival,
            departure,
            travel,
            t_end,
        )
        _kernel("orml_schedule_walk")(*_per_route(n_routes), args)
    return arrival, departure, travel, t_end


def insertion_costs_cuda(
    routes: RouteArrays, orders: OrderArrays, ctx: Any, late_weight: float, pairs: bool
) -> Any:
    """Launch one thread per pair; arguments already checked by ``insertion_costs``."""
    import cupy

    from kernels.insertion_types import Insertions

    n_routes = routes.shape[0]
    total = n_routes if pairs else n_routes * len(orders)
    shape = (n_routes,) if pairs else (n_routes, len(orders))
    f32, i32 = cupy.float32, cupy.int32
    outputs = {
        "out_cost": cupy.empty(shape, f32),
        "out_travel": cupy.empty(shape, f32),
        "out_lateness": cupy.empty(shape, f32),
        "out_arrival": cupy.empty(shape, f32),
        "out_i": cupy.empty(shape, i32),
        "out_j": cupy.empty(shape, i32),
    }
    if total:
        args = launch_arguments(routes, orders, ctx, late_weight, pairs, outputs, cupy)
        _kernel()(((total + _BLOCK - 1) // _BLOCK,), (_BLOCK,), tuple(args))
    o = outputs
    return Insertions(
        o["out_cost"], o["out_i"], o["out_j"], o["out_travel"], o["out_lateness"], o["out_arrival"]
    )
