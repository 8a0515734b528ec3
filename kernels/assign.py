"""``assign``: give orders to riders, at most one order per rider per call, minimising total cost.

Objective, in order: assign as many orders as possible (only finite-cost pairs), then minimise
the summed cost. (A dispatcher would rather deliver an order late than not at all; the hard limit
on lateness is already in the cost's +inf.) More than one order per rider in a round is the
caller's loop: assign, insert, re-price, assign again (``planner.dispatch_round``), because a
rider's second order must be priced against the route that includes its first.

Two algorithms:

* exact (CPU; the default): the shortest augmenting path method for rectangular problems
  (Jonker & Volgenant 1987, in the form of Crouse 2016, the one SciPy's
  ``linear_sum_assignment`` implements) on the cost with infeasible pairs priced above any sum
  of feasible ones. Two builds with one answer, held bit-equal by ``tests/kernels/test_assign.py``:
  ``shortest_augmenting_path`` here (NumPy, vectorised over columns) and its Numba twin in
  ``_assign_jit.py`` (the same steps as a loop; as fast as SciPy on dispatch rounds). Why not
  SciPy: ``import scipy.optimize`` costs a replica 0.4-0.5 s of its start, which a replacement
  replica pays while the app is short of capacity; SciPy stays the oracle in the tests.
* ``"auction"`` (any ``xp``; the on-device method, opt-in until it is measured on a GPU; on
  NumPy it is far slower than the exact method): Bertsekas' forward auction with epsilon scaling
  (Jacobi bidding, all unassigned orders bid at once). Each order also has a private "stay
  unassigned" object at the same high price, so the answer has the exact method's objective. The
  total cost is within ``n_orders * eps`` of the optimum (Bertsekas 1988, eps-complementary
  slackness); ``eps`` defaults to 1e-3 seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernels import compiled
from kernels.backend import array_module, to_numpy


def _unassigned_price(cost_np: np.ndarray) -> float:
    finite = cost_np[np.isfinite(cost_np)]
    if finite.size == 0:
        return 1.0
    span = float(np.abs(finite).max()) + 1.0
    return span * (min(cost_np.shape) + 1)


def assign(cost: Any, *, method: str = "auto", eps: float = 1e-3) -> Any:
    """The rider of every order.

    cost : float32[R, O]  weighted seconds; +inf where the rider cannot take the order.
    method : "auto" (exact: the compiled build unless it is still loading, see
        ``kernels.compiled``; on a GPU the [R, O] matrix is copied to the host, 1.2 MB for
        1000 x 300), "jit" or "loop" (exact, that build), or "auction" (runs on the input's
        device).
    eps : auction only: final bid increment in cost units; optimality tolerance n_orders * eps.
    Returns int32[O] on the input's device: the rider index, or -1 for unassigned.
    Raises ValueError on a non-2-D cost, NaN costs, or an unknown method.
    """
    xp = array_module(cost)
    if cost.ndim != 2:
        raise ValueError(f"cost must be 2-D [R, O], got shape {tuple(cost.shape)}")
    if bool(xp.isnan(cost).any()):
        raise ValueError("cost contains NaN")
    if method == "auto":
        method = "loop" if compiled.warming() else "jit"
    if method in ("jit", "loop"):
        return xp.asarray(_exact(to_numpy(cost), method))
    if method == "auction":
        return auction(cost, eps=eps)
    raise ValueError(f"unknown method {method!r}: expected 'auto', 'jit', 'loop' or 'auction'")


def _exact(cost: np.ndarray, build: str) -> np.ndarray:
    """The exact method on a host cost float32[R, O]; int32[O] rider per order or -1."""
    n_riders, n_orders = cost.shape
    rider_of = np.full(n_orders, -1, np.int32)
    if n_riders == 0 or n_orders == 0:
        return rider_of
    finite = np.isfinite(cost)
    priced = np.where(finite, cost.astype(np.float64), _unassigned_price(cost))
    # The method wants no more rows than columns; a row-major copy keeps its row scans
    # contiguous (a transposed view makes them strided, and slower).
    by_order = n_orders <= n_riders
    priced = np.ascontiguousarray(priced.T if by_order else priced)
    if build == "jit":
        from kernels._assign_jit import shortest_augmenting_path_jit as solve
    else:
        solve = shortest_augmenting_path
    col_of_row = solve(priced)
    if by_order:
        rows, cols = col_of_row, np.arange(n_orders)
    else:
        rows, cols = np.arange(n_riders), col_of_row
    keep = finite[rows, cols]
    rider_of[cols[keep]] = rows[keep]
    return rider_of


def shortest_augmenting_path(cost: np.ndarray) -> np.ndarray:
    """Minimum-cost assignment of every row to a distinct column (NumPy build).

    cost : float64[N, M], N <= M, finite, C-contiguous. Returns int64[N]: the column of each row.

    One Dijkstra search per row over reduced costs ``cost[i, j] - u[i] - v[j]`` (kept >= 0 by
    the dual prices u, v) finds the cheapest augmenting path to a free column; the duals are
    then updated so the next search stays non-negative. Ties between columns go to the first
    free one, else the first one: a free column ends the search at once, which keeps paths short
    where many pairs share the "unassigned" price. The Numba twin must make the same choices.
    """
    n_rows, n_cols = cost.shape
    u, v = np.zeros(n_rows), np.zeros(n_cols)
    col4row = np.full(n_rows, -1, np.int64)
    row4col = np.full(n_cols, -1, np.int64)
    final = np.empty(n_cols)  # shortest path cost of each column, once visited
    open_cost = np.empty(n_cols)  # tentative shortest path cost; +inf once visited
    path = np.empty(n_cols, np.int64)  # the row each column is reached from
    reduced = np.empty(n_cols)
    improves = np.empty(n_cols, bool)
    for start in range(n_rows):
        open_cost.fill(np.inf)
        path.fill(-1)
        rows, cols = [], []
        i, min_val = start, 0.0
        while True:
            np.add(cost[i], min_val - u[i], out=reduced)
            np.subtract(reduced, v, out=reduced)
            reduced[cols] = np.inf
            np.less(reduced, open_cost, out=improves)
            path[improves] = i
            np.minimum(open_cost, reduced, out=open_cost)
            j = int(open_cost.argmin())
            lowest = float(open_cost[j])
            if row4col[j] >= 0:
                free_ties = np.flatnonzero((open_cost == lowest) & (row4col < 0))
                if free_ties.size:
                    j = int(free_ties[0])
            min_val = lowest
            final[j] = lowest
            open_cost[j] = np.inf
            cols.append(j)
            if row4col[j] < 0:
                break
            i = int(row4col[j])
            rows.append(i)
        u[start] += min_val
        seen_rows = np.asarray(rows, np.int64)
        u[seen_rows] += min_val - final[col4row[seen_rows]]
        seen_cols = np.asarray(cols, np.int64)
        v[seen_cols] -= min_val - final[seen_cols]
        while True:  # augment along the path back from the free column j
            i = int(path[j])
            row4col[j] = i
            col4row[i], j = j, col4row[i]
            if i == start:
                break
    return col4row


def auction(cost: Any, *, eps: float = 1e-3, max_iter: int = 1_000_000) -> Any:
    """Forward auction with epsilon scaling (see module doc); same contract as ``assign``.

    The problem is made square so that eps-scaling stays valid: bidders are the O orders plus R
    "free rider" bidders; objects are the R riders plus O "unassigned" objects. An order values a
    rider at -cost and only its own unassigned object at -big; a free-rider bidder values every
    object (any rider or unassigned object) at 0. A perfect matching
    always exists, and its value is minus the exact method's objective.
    Raises RuntimeError if it has not converged after ``max_iter`` bidding rounds.
    """
    xp = array_module(cost)
    n_riders, n_orders = cost.shape
    if n_orders == 0 or n_riders == 0:
        return xp.full(n_orders, -1, xp.int32)
    big = _unassigned_price(to_numpy(cost))
    n = n_riders + n_orders
    value = xp.full((n, n), -xp.inf, xp.float64)
    value[:n_orders, :n_riders] = xp.where(xp.isfinite(cost.T), -cost.T.astype(xp.float64), -xp.inf)
    value[xp.arange(n_orders), n_riders + xp.arange(n_orders)] = -big
    value[n_orders:, :] = 0.0
    price = xp.zeros(n, xp.float64)
    scale = max(big / 4.0, eps)
    iters = 0
    while True:
        owner = xp.full(n, -1, xp.int64)  # bidder holding each object
        held = xp.full(n, -1, xp.int64)  # object held by each bidder
        while True:
            bidders = xp.nonzero(held < 0)[0]
            if bidders.shape[0] == 0:
                break
            iters += 1
            if iters > max_iter:
                raise RuntimeError(f"auction did not converge in {max_iter} bidding rounds")
            net = value[bidders] - price[None, :]
            best = xp.argmax(net, axis=1)
            rows = xp.arange(bidders.shape[0])
            best_v = net[rows, best]
            net[rows, best] = -xp.inf
            second_v = net.max(axis=1)
            gap = xp.where(xp.isfinite(second_v), best_v - second_v, big)
            bid = price[best] + gap + scale
            # The highest bid wins each object; ties go to the later bidder in sort order.
            order = xp.lexsort(xp.stack([bid, best]))
            obj, who, amount = best[order], bidders[order], bid[order]
            last = xp.ones(obj.shape[0], dtype=bool)
            last[:-1] = obj[1:] != obj[:-1]
            obj, who, amount = obj[last], who[last], amount[last]
            losers = owner[obj]
            held[losers[losers >= 0]] = -1
            owner[obj] = who
            held[who] = obj
            price[obj] = amount
        if scale <= eps:
            break
        scale = max(scale / 5.0, eps)
    got = held[:n_orders]
    return xp.where(got < n_riders, got, -1).astype(xp.int32)
