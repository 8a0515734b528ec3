"""The CUDA kernels as ``counting_cupy`` runs them: each reads its launch's arguments by the
``.cu`` parameter names and writes its outputs with the kernel's host twin (the compiled
builds, or for the pair scans the rule they implement in NumPy). On a GPU the kernels are held
to these twins by ``test_insertion_costs``, ``test_improve``, ``test_schedule`` and
``test_pair_scan``; here they stand in so that the host's side of a GPU round runs on a CPU."""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels.arrays import STOP_ARRAYS, OrderArrays, RouteArrays
from kernels.insertion_types import RouteContext

from .counting_cupy import EMULATORS

_ROUTE_FIELDS = tuple(RouteArrays.__dataclass_fields__)
_ORDER_FIELDS = tuple(OrderArrays.__dataclass_fields__)
_CONTEXT_FIELDS = tuple(RouteContext.__dataclass_fields__)


def _routes(v: dict[str, Any], n_routes: int, n_slots: int) -> RouteArrays:
    """The launch's route arrays; those it does not pass hold their padding values."""
    empty = RouteArrays.empty(n_routes, n_slots)
    given = {name: v[name] for name in _ROUTE_FIELDS if name in v}
    given.setdefault("insert_limit", given.get("n_stops", empty.insert_limit))
    return RouteArrays(**{name: given.get(name, getattr(empty, name)) for name in _ROUTE_FIELDS})


def _emulates(name: str):
    def register(fn):
        EMULATORS[name] = fn
        return fn

    return register


@_emulates("orml_route_context")
def _route_context(v: dict[str, Any]) -> None:
    from kernels._insertion_costs_jit import route_context_jit

    ctx = route_context_jit(_routes(v, int(v["n_routes"]), int(v["n_slots"])))
    for name in _CONTEXT_FIELDS:
        v[name][...] = getattr(ctx, name)


@_emulates("orml_schedule_walk")
def _schedule_walk(v: dict[str, Any]) -> None:
    from kernels._schedule_jit import walk_jit

    got = walk_jit(_routes(v, int(v["n_routes"]), int(v["n_slots"])))
    for name, a in zip(("arrival", "departure", "travel", "t_end"), got, strict=True):
        v[name][...] = a


@_emulates("orml_insertion_costs")
def _insertion_costs(v: dict[str, Any]) -> None:
    from kernels._insertion_costs_jit import insertion_costs_jit

    routes = _routes(v, int(v["n_routes"]), int(v["n_slots"]))
    orders = OrderArrays(**{name: v[name] for name in _ORDER_FIELDS})
    ctx = RouteContext(**{name: v[name] for name in _CONTEXT_FIELDS})
    got = insertion_costs_jit(routes, orders, ctx, float(v["late_weight"]), bool(v["pairs"]))
    for out, a in (
        ("out_cost", got.cost),
        ("out_i", got.pickup_pos),
        ("out_j", got.dropoff_pos),
        ("out_travel", got.travel),
        ("out_lateness", got.lateness),
        ("out_arrival", got.dropoff_arrival),
    ):
        v[out][...] = a.reshape(v[out].shape)


@_emulates("orml_improve")
def _improve(v: dict[str, Any]) -> None:
    from kernels._improve_jit import improve_jit

    routes = _routes(v, int(v["stop_ready"].shape[0]), int(v["n_slots"]))
    got, owner, moves = improve_jit(
        routes,
        v["owner"],
        v["rows"],
        float(v["late_weight"]),
        int(v["max_passes"]),
        float(v["tol"]),
    )
    for name in STOP_ARRAYS:
        v[name][...] = getattr(got, name)
    v["owner"][...] = owner
    v["moves"][...] = 0
    if v["moves"].size:
        v["moves"][0] = moves


@_emulates("orml_insert_orders")
def _insert_orders(v: dict[str, Any]) -> None:
    from kernels.route_edit import insert_orders

    n_slots = int(v["n_slots"])
    routes = _routes(v, int(v["n_stops"].shape[0]), n_slots)
    orders = OrderArrays(**{name: v[name] for name in _ORDER_FIELDS})
    got, owner = insert_orders(
        routes,
        v["owner"],
        v["rows"],
        orders,
        v["pickup_pos"],
        v["dropoff_pos"],
        v["keys"],
        method="loop",
        order_index=v["order_of"],
    )
    assert got.shape[1] == n_slots, "the launcher grows the routes before the launch"
    for name in (*STOP_ARRAYS, "n_stops", "insert_limit"):
        v[name][...] = getattr(got, name)
    v["owner"][...] = owner


def _under(bound: np.ndarray, threshold: np.ndarray, abs_tol: float, rel_tol: float) -> Any:
    """``orml_under``: a bound within rounding of the threshold counts as under it."""
    b = bound.astype(np.float64)
    return b - (abs_tol + rel_tol * np.abs(b)) < threshold


@_emulates("orml_top_candidates")
def _top_candidates(v: dict[str, Any]) -> None:
    bound_t, k = v["bound_t"], int(v["k"])
    selected = v["orders"] if isinstance(v["orders"], np.ndarray) else np.arange(bound_t.shape[0])
    riders = np.arange(bound_t.shape[1])
    v["rider"][...] = -1
    v["price"][...] = np.inf
    for s, o in enumerate(selected[: int(v["n_selected"])]):
        row = bound_t[o]
        keep = np.isfinite(row)
        if isinstance(v["u"], np.ndarray):
            keep &= _under(row, v["u"][o] + v["v"], v["abs_tol"], v["rel_tol"])
        by = np.lexsort((riders[keep], row[keep]))[:k]  # by bound, then rider
        v["rider"][s, : by.size] = riders[keep][by]
        v["price"][s, : by.size] = row[keep][by]


@_emulates("orml_below_duals")
def _below_duals(v: dict[str, Any]) -> None:
    bound_t = v["bound_t"]
    under = _under(bound_t, v["u"][:, None] + v["v"][None, :], v["abs_tol"], v["rel_tol"])
    order, rider = np.nonzero(under)
    v["count"][0] = order.size
    n = min(order.size, int(v["cap"]))
    v["rider"][:n] = rider[:n]
    v["order"][:n] = order[:n]
