"""assign: the exact method is optimal (max orders, then min cost) and its two builds agree bit
for bit; the auction is within n * eps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernels.assign import assign, shortest_augmenting_path


def objective(cost: np.ndarray, rider_of: np.ndarray) -> tuple[int, float]:
    got = np.nonzero(rider_of >= 0)[0]
    return len(got), float(cost[rider_of[got], got].astype(np.float64).sum())


def brute_force(cost: np.ndarray) -> tuple[int, float]:
    n_riders, n_orders = cost.shape
    best = (0, 0.0)
    for perm in itertools.permutations(list(range(n_riders)) + [-1] * n_orders, n_orders):
        used = [r for r in perm if r >= 0]
        if len(set(used)) != len(used):
            continue
        if any(r >= 0 and not np.isfinite(cost[r, o]) for o, r in enumerate(perm)):
            continue
        n, c = objective(cost, np.array(perm, dtype=np.int64))
        if n > best[0] or (n == best[0] and c < best[1]):
            best = (n, c)
    return best


def random_cost(seed: int, n_riders: int, n_orders: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cost = rng.uniform(0, 3000, (n_riders, n_orders)).astype(np.float32)
    cost[rng.random(cost.shape) < rng.uniform(0, 0.9)] = np.inf
    return cost


@pytest.mark.parametrize("method", ["jit", "loop"])
@given(seed=st.integers(0, 2**31 - 1), n_riders=st.integers(0, 4), n_orders=st.integers(0, 4))
def test_exact_is_optimal(method, seed, n_riders, n_orders):
    """Against brute force: as many orders as possible, then the least cost; riders used once."""
    cost = random_cost(seed, n_riders, n_orders)
    got = assign(cost, method=method)
    assert got.dtype == np.int32 and got.shape == (n_orders,)
    used = got[got >= 0]
    assert len(set(used.tolist())) == used.size
    n, c = objective(cost, got)
    bn, bc = brute_force(cost)
    assert n == bn
    assert c == pytest.approx(bc, rel=1e-6, abs=1e-3)


def dispatch_cost(n_riders: int, n_orders: int, seed: int) -> np.ndarray:
    """A real round's first-pass cost matrix: insertion costs, +inf where infeasible."""
    from kernels.insertion_costs import insertion_costs
    from planner import generate_round, pack_round

    packed = pack_round(generate_round(n_riders, n_orders, seed=seed))
    return insertion_costs(packed.routes, packed.orders, late_weight=4.0).cost


@pytest.mark.parametrize(
    "cost",
    [
        pytest.param(dispatch_cost(120, 40, 0), id="dispatch-120x40"),
        pytest.param(dispatch_cost(25, 60, 1), id="dispatch-25x60"),
        pytest.param(random_cost(5, 300, 90), id="random-300x90"),
        pytest.param(np.round(random_cost(6, 80, 80) / 500.0), id="many-ties-80x80"),
    ],
)
def test_exact_matches_scipy(cost):
    """The same optimum as SciPy's linear_sum_assignment (the oracle), in both builds."""
    from scipy.optimize import linear_sum_assignment

    cost = np.asarray(cost, np.float32)
    finite = np.isfinite(cost)
    big = float(np.abs(cost[finite]).max() + 1.0) * (min(cost.shape) + 1)
    rows, cols = linear_sum_assignment(np.where(finite, cost.astype(np.float64), big))
    keep = finite[rows, cols]
    want = (int(keep.sum()), float(cost[rows[keep], cols[keep]].astype(np.float64).sum()))
    for method in ("jit", "loop"):
        n, c = objective(cost, assign(cost, method=method))
        assert n == want[0]
        assert c == pytest.approx(want[1], rel=1e-9)


@given(
    seed=st.integers(0, 2**31 - 1),
    n_rows=st.integers(1, 30),
    extra_cols=st.integers(0, 30),
    levels=st.sampled_from([3, 50, 0]),
)
def test_compiled_build_equals_numpy_build(seed, n_rows, extra_cols, levels):
    """Bit-equal answers, ties included (levels > 0 draws costs from a few values)."""
    from kernels._assign_jit import shortest_augmenting_path_jit

    rng = np.random.default_rng(seed)
    shape = (n_rows, n_rows + extra_cols)
    cost = rng.integers(0, levels, shape) * 100.0 if levels else rng.uniform(0, 3000, shape)
    assert np.array_equal(shortest_augmenting_path(cost), shortest_augmenting_path_jit(cost))


@given(seed=st.integers(0, 2**31 - 1), n_riders=st.integers(1, 25), n_orders=st.integers(1, 25))
def test_auction_within_tolerance_of_exact(seed, n_riders, n_orders):
    """The device method: same number assigned, cost within n_orders * eps of optimal."""
    cost = random_cost(seed, n_riders, n_orders)
    eps = 1e-3
    want = objective(cost, assign(cost))
    got = assign(cost, method="auction", eps=eps)
    used = got[got >= 0]
    assert len(set(used.tolist())) == used.size
    n, c = objective(cost, got)
    assert n == want[0]
    assert c <= want[1] + n_orders * eps + 1e-6


def test_nan_and_bad_shapes_are_rejected():
    with pytest.raises(ValueError, match="NaN"):
        assign(np.array([[np.nan]], np.float32))
    with pytest.raises(ValueError, match="2-D"):
        assign(np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="unknown method"):
        assign(np.zeros((1, 1), np.float32), method="greedy")


def test_auction_on_a_device_matches_exact(device):
    cupy = device

    cost = random_cost(11, 200, 80)
    want = objective(cost, assign(cost))
    got = assign(cupy.asarray(cost), method="auction").get()
    n, c = objective(cost, got)
    assert n == want[0] and c <= want[1] + 80 * 1e-3 + 1e-6
