"""assign: Hungarian is optimal (max orders, then min cost); the auction is within n * eps."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernels.assign import assign


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


@given(seed=st.integers(0, 2**31 - 1), n_riders=st.integers(0, 4), n_orders=st.integers(0, 4))
def test_hungarian_is_optimal(seed, n_riders, n_orders):
    """Against brute force: as many orders as possible, then the least cost; riders used once."""
    cost = random_cost(seed, n_riders, n_orders)
    got = assign(cost, method="hungarian")
    assert got.dtype == np.int32 and got.shape == (n_orders,)
    used = got[got >= 0]
    assert len(set(used.tolist())) == used.size
    n, c = objective(cost, got)
    bn, bc = brute_force(cost)
    assert n == bn
    assert c == pytest.approx(bc, rel=1e-6, abs=1e-3)


@given(seed=st.integers(0, 2**31 - 1), n_riders=st.integers(1, 25), n_orders=st.integers(1, 25))
def test_auction_within_tolerance_of_hungarian(seed, n_riders, n_orders):
    """The device method: same number assigned, cost within n_orders * eps of optimal."""
    cost = random_cost(seed, n_riders, n_orders)
    eps = 1e-3
    want = objective(cost, assign(cost, method="hungarian"))
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


@pytest.mark.gpu
def test_auction_on_gpu_matches_hungarian():
    import cupy

    cost = random_cost(11, 200, 80)
    want = objective(cost, assign(cost, method="hungarian"))
    got = assign(cupy.asarray(cost), method="auction").get()
    n, c = objective(cost, got)
    assert n == want[0] and c <= want[1] + 80 * 1e-3 + 1e-6
