"""``assign``: give orders to riders, at most one order per rider per call, minimising total cost.

Objective, in order: assign as many orders as possible (only finite-cost pairs), then minimise
the summed cost. (A dispatcher would rather deliver an order late than not at all; the hard limit
on lateness is already in the cost's +inf.) More than one order per rider in a round is the
caller's loop: assign, insert, re-price, assign again (``planner.dispatch_round``), because a
rider's second order must be priced against the route that includes its first.

Two methods:

* ``"hungarian"`` (CPU, exact): SciPy's ``linear_sum_assignment`` on the cost with infeasible
  pairs priced above any sum of feasible ones.
* ``"auction"`` (any ``xp``; the on-device method, opt-in until it is measured on a GPU; on
  NumPy it is far slower than the Hungarian method): Bertsekas' forward auction with epsilon scaling
  (Jacobi bidding, all unassigned orders bid at once). Each order also has a private "stay
  unassigned" object at the same high price, so the answer has the Hungarian objective. The
  total cost is within ``n_orders * eps`` of the optimum (Bertsekas 1988, eps-complementary
  slackness); ``eps`` defaults to 1e-3 seconds.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
    method : "auto" (= "hungarian": exact, and on a GPU the [R, O] matrix is copied to the host,
        1.2 MB for 1000 x 300), "hungarian" or "auction" (runs on the input's device).
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
        method = "hungarian"
    if method == "hungarian":
        return xp.asarray(_hungarian(to_numpy(cost)))
    if method == "auction":
        return auction(cost, eps=eps)
    raise ValueError(f"unknown method {method!r}: expected 'auto', 'hungarian' or 'auction'")


def _hungarian(cost: np.ndarray) -> np.ndarray:
    from scipy.optimize import linear_sum_assignment

    n_riders, n_orders = cost.shape
    rider_of = np.full(n_orders, -1, np.int32)
    if n_riders == 0 or n_orders == 0:
        return rider_of
    big = _unassigned_price(cost)
    finite = np.isfinite(cost)
    rows, cols = linear_sum_assignment(np.where(finite, cost.astype(np.float64), big))
    keep = finite[rows, cols]
    rider_of[cols[keep]] = rows[keep]
    return rider_of


def auction(cost: Any, *, eps: float = 1e-3, max_iter: int = 1_000_000) -> Any:
    """Forward auction with epsilon scaling (see module doc); same contract as ``assign``.

    The problem is made square so that eps-scaling stays valid: bidders are the O orders plus R
    "free rider" bidders; objects are the R riders plus O "unassigned" objects. An order values a
    rider at -cost and only its own unassigned object at -big; a free-rider bidder values every
    object (any rider or unassigned object) at 0. A perfect matching
    always exists, and its value is minus the Hungarian objective.
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
