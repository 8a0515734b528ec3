"""The CuPy launchers of ``pair_scan.cu`` (imported only when CuPy inputs arrive): each order's
k cheapest riders, and the pairs below the duals, over a pass's prices on the device.

Both return host index arrays (what ``certified_assign`` prices and solves over): the only
bytes that cross are the chosen pairs and one count.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from kernels._insertion_costs_cuda import NVRTC_OPTIONS
from kernels.transfers import to_device, to_host

SOURCE = Path(__file__).with_name("pair_scan.cu")
_THREADS = 256  # PAIR_SCAN_THREADS in the source
_PAIR_BLOCKS = 1024  # a grid-stride loop: enough blocks to fill any card we place on


@lru_cache(maxsize=1)
def _module() -> Any:
    import cupy

    return cupy.RawModule(code=SOURCE.read_text(), options=NVRTC_OPTIONS)


def top_candidates_cuda(
    bound_t: Any,
    k: int,
    orders: np.ndarray | None,
    u: np.ndarray | None,
    v: np.ndarray | None,
    abs_tol: float,
    rel_tol: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(rider, order) int64 on the host: each order's (of ``orders``, default all) k pairs of
    least finite bound, ascending by (bound, rider), order by order; with duals (u float64[O],
    v float64[R]) only among the pairs under them. bound_t : CuPy float32[O, R]."""
    import cupy

    n_orders, n_riders = (int(n) for n in bound_t.shape)
    selected = np.arange(n_orders) if orders is None else np.asarray(orders, np.int64)
    k = min(k, n_riders)
    if k == 0 or selected.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rider = cupy.empty((selected.size, k), cupy.int32)
    price = cupy.empty((selected.size, k), cupy.float32)
    null = np.uint64(0)  # a null pointer: no selection, no duals
    given = ([] if orders is None else [selected]) + (
        [] if u is None else [np.asarray(u, np.float64), np.asarray(v, np.float64)]
    )
    moved = to_device(given, cupy)  # one copy in
    picked = null if orders is None else moved.pop(0)
    duals = (null, null) if u is None else (moved[0], moved[1])
    _module().get_function("orml_top_candidates")(
        (int(selected.size),),
        (_THREADS,),
        (
            cupy.ascontiguousarray(bound_t),
            np.int32(n_orders),
            np.int32(n_riders),
            picked,
            np.int32(selected.size),
            np.int32(k),
            duals[0],
            duals[1],
            np.float64(abs_tol),
            np.float64(rel_tol),
            rider,
            price,
        ),
    )
    host = rider.get()  # the one copy back: k riders per order
    sel, _ = np.nonzero(host >= 0)
    return host[host >= 0].astype(np.int64), selected[sel]


def below_duals_cuda(
    bound_t: Any, u: np.ndarray, v: np.ndarray, abs_tol: float, rel_tol: float, cap: int
) -> tuple[int, np.ndarray, np.ndarray]:
    """(count, rider, order): every pair whose bound is under ``u[o] + v[r]``, counted and,
    when there are at most ``cap``, returned on the host sorted by (rider, order) as
    ``numpy.nonzero`` of the [R, O] mask would; past ``cap`` the lists are empty."""
    import cupy

    n_orders, n_riders = (int(n) for n in bound_t.shape)
    count = cupy.zeros(1, cupy.uint64)
    rider = cupy.empty(max(cap, 1), cupy.int64)
    order = cupy.empty(max(cap, 1), cupy.int64)
    if n_orders and n_riders:
        u_at, v_at = to_device([np.asarray(u, np.float64), np.asarray(v, np.float64)], cupy)
        _module().get_function("orml_below_duals")(
            (_PAIR_BLOCKS,),
            (_THREADS,),
            (
                cupy.ascontiguousarray(bound_t),
                np.int32(n_orders),
                np.int32(n_riders),
                u_at,
                v_at,
                np.float64(abs_tol),
                np.float64(rel_tol),
                np.uint64(cap),
                count,
                rider,
                order,
            ),
        )
    n = int(count.get()[0])
    if n > cap:
        return n, np.zeros(0, np.int64), np.zeros(0, np.int64)
    r, o = to_host([rider[:n], order[:n]], cupy)
    by = np.lexsort((o, r))
    return n, r[by], o[by]
