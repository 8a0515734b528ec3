"""``certified_assign``: the exact assignment of a round, pricing only the pairs that can win.

``assign`` needs every (rider, order) price and solves a dense [R, O] problem; at 5000 x 2000
both the pricing and the dense search cost seconds on a CPU, while the answer only ever uses a
few pairs per order. This is column generation with an LP certificate:

1. Price each order's ``first`` pairs of least lower bound (``insertion_bounds``) exactly.
2. Solve the assignment over the priced pairs (``sparse_assignment``), which returns duals
   ``u`` (orders) and ``v`` (riders, <= 0, 0 where free).
3. A pair whose exact price, or failing that whose lower bound, is at least ``u[o] + v[r]``
   satisfies the dual constraint: it cannot lower the total. Price the pairs whose bound
   falls below, and add those whose price does too; solve again. When no pair is left below,
   the duals are feasible for the whole problem, so by weak duality the answer is optimal over
   every pair: the same total as the dense method (ties may pick another of the equal optima).

Two things keep the work near what the answer needs. The duals of an early, sparse solve are
loose (an order short of good pairs is priced high), so each step takes only each order's ``k``
most promising pairs below its threshold (least bound, or least price for pairs already
priced), ``k`` doubling from step to step; and a priced pair only enters the solve once its
price breaks the current duals, so the solve runs on a few pairs per order however many were
priced on loose bounds.

The objective is ``assign``'s (as many orders as possible, then least cost); the sparse solver
prices "no rider" at a finite amount, which means "as many as possible" as long as the orders
left without a rider could take no rider at all. So the orders left over have every remaining
pair priced; if one of them turns out feasible (more orders than free riders can take, say) the
answer is not certified and ``certified_assign`` returns None: the caller solves densely.

Bounds are compared with a small tolerance (``ABS_TOL`` + ``REL_TOL`` x |bound|), so float32
rounding in the bounds can only price a pair more, never skip one that could win.

Two sources of bounds: ``HostBounds`` (lower bounds on the host, scanned by compiled loops) and
``DeviceCosts`` (every pair already priced on a GPU: the bounds are the prices themselves, so
only the few pairs that can win travel to the host for the sparse solve).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from kernels.backend import array_module, to_numpy
from kernels.sparse_assign import sparse_assignment
from kernels.transfers import to_device, to_host

ABS_TOL = 1e-3
REL_TOL = 1e-5
#: Each order's pairs priced before the first solve, and taken per order in the first step.
FIRST_PAIRS = 24
#: The same where every pair is priced already (``DeviceCosts``): more pairs cost only their
#: transfer, and with more alternatives per order the first solve's duals hold on more of the
#: rest: large rounds take one or two sparse solves instead of three.
DEVICE_FIRST_PAIRS = 96
#: Pairs per order below the duals that are all priced at once; past it, each order's k most
#: promising only (k from FIRST_PAIRS, doubling with each solve).
TAKE_ALL = 64
#: Share of the orders' median dual by which a pair may lie above the duals and still join.
MARGIN = 0.1
#: Past this share of all pairs priced while widening orders left over, give up (return None)
#: on a problem of at least ``DENSE_MIN_PAIRS`` pairs; a smaller one widens to the end (it is
#: cheap, and then None means only what it must: an order left over could take a rider).
DENSE_SHARE = 0.3
DENSE_MIN_PAIRS = 10_000

_NONE = np.zeros(0)


class PairBounds(Protocol):
    """Lower bounds on every (rider, order) price, forgetting the pairs already priced."""

    shape: tuple[int, int]

    def cheapest(
        self, k: int, orders: np.ndarray | None = None, u: Any = None, v: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rider, order) int64: each order's (of ``orders``, default all) k unpriced pairs of
        least finite bound; with duals (u, v), only among the pairs whose bound is below
        ``u[o] + v[r]`` (within the tolerance)."""
        ...

    def below(self, u: np.ndarray, v: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The unpriced pairs whose bound is below ``u[o] + v[r]`` (within the tolerance):
        all of them, or past ``TAKE_ALL`` per order on average, each order's k of least
        bound among them."""
        ...

    def finite_of(self, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unpriced pairs of these orders with a finite bound."""
        ...

    def forget(self, rider: np.ndarray, order: np.ndarray) -> None:
        """Mark these pairs priced."""
        ...


class HostBounds:
    """``PairBounds`` over a host float32[R, O] bound matrix (taken over and overwritten)."""

    def __init__(self, bound: np.ndarray):
        from kernels._jit_builds import PARALLEL_MIN_WORK

        self.bound = bound
        self.shape = (int(bound.shape[0]), int(bound.shape[1]))
        self.parallel = bound.size >= PARALLEL_MIN_WORK

    def _smallest(self, bound: np.ndarray, k: int, u: Any, v: Any) -> tuple[Any, Any]:
        from kernels._pair_scan_jit import smallest_parallel, smallest_serial

        scan = smallest_parallel if self.parallel else smallest_serial
        u = _NONE if u is None else np.asarray(u, np.float64)
        v = _NONE if v is None else np.asarray(v, np.float64)
        return scan(bound, k, u, v, ABS_TOL, REL_TOL)

    def cheapest(
        self, k: int, orders: np.ndarray | None = None, u: Any = None, v: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if orders is None:
            return self._smallest(self.bound, k, u, v)
        sub = np.ascontiguousarray(self.bound[:, orders])
        rider, col = self._smallest(sub, k, None if u is None else u[orders], v)
        return rider, orders[col].astype(np.int64)

    def below(self, u: np.ndarray, v: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        from kernels._pair_scan_jit import below_parallel, below_serial

        scan = below_parallel if self.parallel else below_serial
        u, v = np.asarray(u, np.float64), np.asarray(v, np.float64)
        cap = TAKE_ALL * self.shape[1]
        rider, order, count = scan(self.bound, u, v, ABS_TOL, REL_TOL, cap)
        if count > cap:
            return self._smallest(self.bound, k, u, v)
        return rider, order

    def finite_of(self, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rider, col = np.nonzero(np.isfinite(self.bound[:, orders]))
        return rider.astype(np.int64), orders[col].astype(np.int64)

    def forget(self, rider: np.ndarray, order: np.ndarray) -> None:
        self.bound[rider, order] = np.inf


def bound_tolerance(bound: Any) -> Any:
    """How far a bound may pass the exact price by float32 rounding (any ``xp``): a pair whose
    bound is within this of the duals' threshold counts as below it, so rounding can only
    price a pair more, never skip one."""
    return ABS_TOL + REL_TOL * abs(bound)


class DeviceCosts:
    """``PairBounds`` whose bounds are the exact prices float32[R, O], for a device that priced
    every pair anyway; ``price`` reads them. On CuPy the scans are ``pair_scan.cu``'s kernels
    over an [O, R] copy (an order per row) and only the chosen pairs, their prices and one
    count cross to the host; on NumPy they are ``HostBounds``' compiled scans (the kernels'
    twins: the same pairs)."""

    def __init__(self, cost: Any):
        self.xp = array_module(cost)
        self.cost = cost
        self.shape = (int(cost.shape[0]), int(cost.shape[1]))
        if self.xp is np:
            self._host: HostBounds | None = HostBounds(cost.copy())
        else:
            self._host = None
            self.bound_t = self.xp.ascontiguousarray(cost.T)
        # The pairs last forgotten, with their index on the device (``price`` reuses it).
        self._forgotten: tuple[np.ndarray, np.ndarray, tuple[Any, Any]] | None = None

    def cheapest(
        self, k: int, orders: np.ndarray | None = None, u: Any = None, v: Any = None
    ) -> tuple[np.ndarray, np.ndarray]:
        if self._host is not None:
            return self._host.cheapest(k, orders, u, v)
        from kernels._pair_scan_cuda import top_candidates_cuda

        return top_candidates_cuda(self.bound_t, k, orders, u, v, ABS_TOL, REL_TOL)

    def below(self, u: np.ndarray, v: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if self._host is not None:
            return self._host.below(u, v, k)
        from kernels._pair_scan_cuda import below_duals_cuda

        cap = TAKE_ALL * self.shape[1]
        count, rider, order = below_duals_cuda(self.bound_t, u, v, ABS_TOL, REL_TOL, cap)
        if count > cap:
            return self.cheapest(k, None, u, v)
        return rider, order

    def finite_of(self, orders: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._host is not None:
            return self._host.finite_of(orders)
        xp = self.xp
        (rows,) = to_device([orders], xp)
        sel, rider = to_host(xp.nonzero(xp.isfinite(self.bound_t[rows])), xp)
        rider, order = rider.astype(np.int64), orders[sel].astype(np.int64)
        by = np.lexsort((order, rider))  # rider by rider, as the host scan gives them
        return rider[by], order[by]

    def forget(self, rider: np.ndarray, order: np.ndarray) -> None:
        if self._host is not None:
            self._host.forget(rider, order)
            return
        order_at, rider_at = to_device([order, rider], self.xp)
        self.bound_t[order_at, rider_at] = self.xp.inf
        self._forgotten = (rider, order, (rider_at, order_at))

    def price(self, rider: np.ndarray, order: np.ndarray) -> np.ndarray:
        # certified_assign prices the pairs it has just forgotten: their index is on the
        # device already.
        last = self._forgotten
        if last is not None and last[0] is rider and last[1] is order:
            at = last[2]
        else:
            at = tuple(to_device([rider, order], self.xp))
        return to_numpy(self.cost[at]).astype(np.float64)


def _least_per_order(order: np.ndarray, key: np.ndarray, k: int, n_orders: int) -> np.ndarray:
    """Indices of each order's k entries of least key (a few more on ties)."""
    from kernels._pair_scan_jit import least_per_group

    return least_per_group(order, np.asarray(key, np.float64), k, n_orders)


class _Known:
    """The feasible pairs priced so far, and which of them the sparse solve sees.

    A priced pair whose exact cost is at least ``u[o] + v[r]`` cannot change the answer under
    those duals, so the solve runs on the pairs that have broken some duals (or were priced
    before any).
    """

    TOL = 1e-7  # relative slack for the duals' own float64 rounding

    def __init__(self, n_orders: int):
        self.rider = np.zeros(0, np.int64)
        self.order = np.zeros(0, np.int64)
        self.cost = np.zeros(0)
        self.in_solve = np.zeros(0, bool)
        self.ever_feasible = np.zeros(n_orders, bool)

    def below(
        self, rider: np.ndarray, order: np.ndarray, cost: np.ndarray, u: Any, v: Any, margin: float
    ) -> np.ndarray:
        """bool: cost below ``u[o] + v[r] + margin`` (beyond the duals' rounding)."""
        thr = u[order] + v[rider]
        return cost < thr + margin - self.TOL * (1.0 + np.abs(thr))

    def add(
        self,
        rider: np.ndarray,
        order: np.ndarray,
        cost: np.ndarray,
        duals: tuple[np.ndarray, np.ndarray] | None,
        margin: float,
    ) -> tuple[int, int]:
        """Keep the feasible pairs; those within ``margin`` of breaking the duals, or all
        without duals, join the solve. Returns (joined, of them breaking the duals)."""
        ok = np.isfinite(cost)
        rider, order, cost = rider[ok], order[ok], cost[ok]
        self.ever_feasible[order] = True
        if duals is None:
            joins = np.ones(rider.size, bool)
            broke = rider.size
        else:
            joins = self.below(rider, order, cost, *duals, margin)
            broke = int(self.below(rider[joins], order[joins], cost[joins], *duals, 0.0).sum())
        self.rider = np.concatenate([self.rider, rider])
        self.order = np.concatenate([self.order, order])
        self.cost = np.concatenate([self.cost, cost])
        self.in_solve = np.concatenate([self.in_solve, joins])
        return int(joins.sum()), broke

    def join_breaking(self, u: np.ndarray, v: np.ndarray, k: int, margin: float) -> int:
        """Each order's k known pairs outside the solve of least reduced cost ``cost - u[o] -
        v[r]``, within ``margin`` of breaking (u, v), join it. Returns how many of those
        joining break the duals.

        Ranked by reduced cost, not by cost: a pair that breaks the duals has a negative
        reduced cost, so it is among its order's first k whenever any pair of that order
        breaks, and a return of 0 means no known pair outside the solve breaks (u, v). Ranked
        by cost, a cheap pair of a contested rider (low ``v``) could hold the place of a
        dearer one of a free rider that breaks, and the breaking pair would never join."""
        out = np.nonzero(~self.in_solve)[0]
        out = out[self.below(self.rider[out], self.order[out], self.cost[out], u, v, margin)]
        reduced = self.cost[out] - u[self.order[out]] - v[self.rider[out]]
        enter = out[_least_per_order(self.order[out], reduced, k, self.ever_feasible.size)]
        self.in_solve[enter] = True
        r, o, c = self.rider[enter], self.order[enter], self.cost[enter]
        return int(self.below(r, o, c, u, v, 0.0).sum())

    def join_all_breaking(self, u: np.ndarray, v: np.ndarray) -> int:
        """Every known pair outside the solve that breaks (u, v) joins it (the check each
        answer passes before it is called certified; ``join_breaking`` makes it find none).
        Returns how many joined."""
        out = np.nonzero(~self.in_solve)[0]
        out = out[self.below(self.rider[out], self.order[out], self.cost[out], u, v, 0.0)]
        self.in_solve[out] = True
        return int(out.size)

    def solve_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        on = self.in_solve
        return self.rider[on], self.order[on], self.cost[on]


@dataclass(frozen=True)
class CertifiedAssignment:
    """rider_of : int64[O] rider per order, -1 unassigned; ever_feasible : bool[O] some pair
    of the order was priced finite; priced : pairs priced in all; solves : sparse solves run."""

    rider_of: np.ndarray
    ever_feasible: np.ndarray
    priced: int
    solves: int


def certified_assign(
    bounds: PairBounds,
    price: Callable[[np.ndarray, np.ndarray], np.ndarray],
    *,
    first: int = FIRST_PAIRS,
    checkpoint: Callable[[], None] | None = None,
) -> CertifiedAssignment | None:
    """The exact assignment (``assign``'s objective) over every pair, pricing few of them.

    bounds : lower bounds on the prices (``PairBounds``), shape (R, O).
    price(rider, order) : float64[P] exact prices of those pairs, +inf where infeasible.
    first : pairs per order priced before the first solve: it moves the work, not the answer
        (the loop ends only once every known pair and every bound is checked against the
        final duals).
    checkpoint : called before each solve; what it raises ends the call.
    Returns ``CertifiedAssignment``, or None when the answer cannot be certified (some order
    left over could take a rider: solve densely then).
    """
    n_riders, n_orders = bounds.shape
    known = _Known(n_orders)
    priced = 0

    def add(rider: np.ndarray, order: np.ndarray, duals: Any = None, margin: float = 0.0) -> int:
        """Price pairs and keep them; returns how many break the duals."""
        nonlocal priced
        if rider.size == 0:
            return 0
        bounds.forget(rider, order)
        cost = np.asarray(price(rider, order), np.float64)
        priced += int(rider.size)
        return known.add(rider, order, cost, duals, margin)[1]

    add(*bounds.cheapest(first))
    solves = 0
    k = first
    widen = first
    exhausted = np.zeros(n_orders, bool)  # every pair of the order priced
    solution = None
    while True:
        if checkpoint is not None:
            checkpoint()
        # From the last answer: only the orders whose new pairs break its duals are searched
        # again (a cold solve where that is many of them).
        solution = sparse_assignment(*known.solve_pairs(), n_riders, n_orders, warm=solution)
        solves += 1
        u, v = solution.u, solution.v
        # An order left without a rider prices "no rider" into its dual, which would put
        # nearly all its pairs below it: widen its own pairs first, doubling each time.
        left = np.nonzero((solution.rider_of < 0) & ~exhausted)[0]
        if left.size:
            widen *= 2
            rider, order = bounds.cheapest(widen, left)
            exhausted[left] = widen >= n_riders
            if rider.size:
                add(rider, order)
                pairs = n_riders * n_orders
                if pairs >= DENSE_MIN_PAIRS and priced > DENSE_SHARE * pairs:
                    return None  # orders compete for too few riders: densely is cheaper
                continue
            exhausted[left] = True
        # Pairs a little above the duals are priced and join too: they are the next to break
        # as the duals move, and a few more pairs in a solve cost less than another solve.
        # Only a pair that breaks the duals calls for another solve.
        margin = MARGIN * float(np.median(np.abs(u))) if u.size else 0.0
        broke = known.join_breaking(u, v, k, margin)
        while not broke:  # the duals hold on every pair priced: price below them
            rider, order = bounds.below(u + margin, v, k)
            if rider.size == 0:
                break
            broke = add(rider, order, (u, v), margin)
        if not broke:
            broke = known.join_all_breaking(u, v)
        if not broke:
            break  # certified: no pair, priced or only bounded, lies below the duals
        k *= 2
    left = np.nonzero(solution.rider_of < 0)[0]
    if left.size:
        add(*bounds.finite_of(left))
        if known.ever_feasible[left].any():
            return None
    return CertifiedAssignment(
        rider_of=solution.rider_of,
        ever_feasible=known.ever_feasible,
        priced=priced,
        solves=solves,
    )
