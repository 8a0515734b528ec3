"""``sparse_assignment``: the exact assignment over a list of priced pairs, with its duals.

The same objective as ``assign`` (as many orders as possible, then the least summed cost), but
over the pairs given instead of a dense [R, O] matrix: a pair left out is a pair that may not
be used. The answer comes with dual prices ``u`` (per order) and ``v`` (per rider, <= 0) such
that every given pair has ``cost >= u[o] + v[r]``, with equality on the chosen ones, and every
free rider has ``v = 0``. By LP duality this certifies more than the sparse problem: a pair left
out whose cost is known to be at least ``u[o] + v[r]`` could not lower the total either
(``certified_assign`` builds on this to price only the pairs that can win).

Host only (a compiled build, ``_sparse_assign_jit``); the tests hold it to SciPy's dense
``linear_sum_assignment``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SparseAssignment:
    """rider_of : int64[O] rider per order, -1 unassigned; u : float64[O], v : float64[R]
    the duals (see module doc); unassigned_cost : the price an order pays for no rider."""

    rider_of: np.ndarray
    u: np.ndarray
    v: np.ndarray
    unassigned_cost: float
    column_duals: np.ndarray  # float64[R + O]: v, then the orders' own "no rider" columns


#: A warm start from a whole answer re-solves only the orders whose pairs break its duals,
#: each search dearer than a cold one's (it may pass through the free columns, a pass over
#: every column); past this share of the orders (and ``RESOLVE_MIN_ROWS``) a cold solve is
#: the cheaper (the assign step of ``bench/kernels.py --round-sizes``).
RESOLVE_MAX_SHARE = 0.05
RESOLVE_MIN_ROWS = 16


def unassigned_price(cost: np.ndarray, n_riders: int, n_orders: int) -> float:
    """A price for "no rider" above any sum of the given finite costs: so one more order
    assigned always beats any saving among the others."""
    if cost.size == 0:
        return 1.0
    span = float(np.abs(cost).max()) + 1.0
    return span * (min(n_riders, n_orders) + 1)


def sparse_assignment(
    rider: np.ndarray,
    order: np.ndarray,
    cost: np.ndarray,
    n_riders: int,
    n_orders: int,
    *,
    warm: SparseAssignment | None = None,
) -> SparseAssignment:
    """Assign orders to riders over the pairs (rider[k], order[k]) at cost[k].

    rider, order : int[P] indices (< n_riders, < n_orders); a pair may appear once.
    cost : float[P] finite weighted seconds (leave infeasible pairs out).
    warm : an earlier answer, usually over a subset of these pairs: the same optimum, usually
        much sooner. A whole answer (``rider_of`` and ``u`` per order, as this function
        returns) is re-solved from its matching, searching again only the orders the new pairs
        concern (``resolve_from``); column duals alone start a cold search. A start that
        cannot be certified is redone from zero.
    Returns ``SparseAssignment``. Raises ValueError on mismatched lengths, indices out of range
    or non-finite costs.
    """
    rider = np.asarray(rider, np.int64)
    order = np.asarray(order, np.int64)
    cost = np.asarray(cost, np.float64)
    if not rider.shape == order.shape == cost.shape or rider.ndim != 1:
        raise ValueError("rider, order and cost must be 1-D arrays of one length")
    if rider.size and (
        rider.min() < 0 or rider.max() >= n_riders or order.min() < 0 or order.max() >= n_orders
    ):
        raise ValueError("pair index out of range")
    if not np.isfinite(cost).all():
        raise ValueError("cost must be finite (leave infeasible pairs out)")
    from kernels._sparse_assign_jit import resolve_from, rows_by_cost, sparse_shortest_paths

    big = unassigned_price(cost, n_riders, n_orders)
    by_order = rows_by_cost(order, rider, cost, n_orders)  # each order's pairs cheapest first
    n_all = n_riders + n_orders
    v0 = np.zeros(0)
    whole = warm is not None and warm.u.shape == warm.rider_of.shape == (n_orders,)
    if whole and warm.column_duals.shape == (n_all,) and warm.rider_of.max(initial=-1) < n_riders:
        own = n_riders + np.arange(n_orders)
        matched = np.where(warm.rider_of >= 0, warm.rider_of, own).astype(np.int64)
        max_freed = max(RESOLVE_MIN_ROWS, int(RESOLVE_MAX_SHARE * n_orders))
        col4row, u, v, certified = resolve_from(
            *by_order, n_riders, big, warm.u, warm.column_duals, matched, max_freed
        )
        if certified:
            return _answer(col4row, u, v, n_riders, big)
    elif warm is not None and warm.column_duals.shape == (n_all,):
        v0 = warm.column_duals
    col4row, u, v, certified = sparse_shortest_paths(*by_order, n_riders, big, v0)
    if not certified:
        col4row, u, v, certified = sparse_shortest_paths(*by_order, n_riders, big, np.zeros(0))
    return _answer(col4row, u, v, n_riders, big)


def _answer(
    col4row: np.ndarray, u: np.ndarray, v: np.ndarray, n_riders: int, big: float
) -> SparseAssignment:
    """The compiled search's (col4row, u, v) as a ``SparseAssignment``."""
    rider_of = np.where(col4row < n_riders, col4row, -1)
    return SparseAssignment(
        rider_of=rider_of, u=u, v=v[:n_riders], unassigned_cost=big, column_duals=v
    )
