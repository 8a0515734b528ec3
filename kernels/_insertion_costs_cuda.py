"""The CuPy launcher of ``insertion_costs.cu`` (imported only when CuPy inputs arrive)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kernels.arrays import OrderArrays, RouteArrays

_BLOCK = 128
# No fused multiply-add: the kernel must round exactly like the NumPy loop.
NVRTC_OPTIONS = ("--fmad=false", "-std=c++14")


@lru_cache(maxsize=1)
def _kernel() -> Any:
    import cupy

    from kernels.insertion_costs import CUDA_SOURCE

    module = cupy.RawModule(code=CUDA_SOURCE.read_text(), options=NVRTC_OPTIONS)
    return module.get_function("orml_insertion_costs")


def insertion_costs_cuda(
    routes: RouteArrays, orders: OrderArrays, ctx: Any, late_weight: float, pairs: bool
) -> Any:
    """Launch one thread per pair; arguments already checked by ``insertion_costs``."""
    import cupy

    from kernels.insertion_costs import Insertions

    n_routes, n_slots = routes.shape
    n_orders = len(orders)
    total = n_routes if pairs else n_routes * n_orders
    shape = (n_routes,) if pairs else (n_routes, n_orders)
    out_cost = cupy.empty(shape, cupy.float32)
    out_travel = cupy.empty(shape, cupy.float32)
    out_late = cupy.empty(shape, cupy.float32)
    out_arr = cupy.empty(shape, cupy.float32)
    out_i = cupy.empty(shape, cupy.int32)
    out_j = cupy.empty(shape, cupy.int32)
    if total == 0:
        return Insertions(out_cost, out_i, out_j, out_travel, out_late, out_arr)
    c = cupy.ascontiguousarray
    args = (
        c(ctx.node_xy),
        c(ctx.depart_prev),
        c(ctx.leg),
        c(ctx.arrival),
        c(ctx.cum_wait),
        c(ctx.soft),
        c(ctx.hard),
        c(ctx.soft_min),
        c(ctx.hard_min),
        c(ctx.load_before),
        c(routes.speed),
        c(routes.capacity),
        c(routes.n_stops),
        c(routes.insert_limit),
        cupy.int32(n_routes),
        cupy.int32(n_slots),
        c(orders.pickup_xy),
        c(orders.dropoff_xy),
        c(orders.ready),
        c(orders.pickup_latest),
        c(orders.due),
        c(orders.dropoff_latest),
        c(orders.pickup_service),
        c(orders.dropoff_service),
        c(orders.size),
        c(orders.has_pickup),
        cupy.int32(n_orders),
        cupy.int32(1 if pairs else 0),
        cupy.float32(late_weight),
        out_cost,
        out_travel,
        out_late,
        out_i,
        out_j,
    )
    grid = ((total + _BLOCK - 1) // _BLOCK,)
    _kernel()(grid, (_BLOCK,), args)
    return Insertions(out_cost, out_i, out_j, out_travel, out_late, out_arr)
