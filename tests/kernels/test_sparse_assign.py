"""sparse_assignment: the optimum of SciPy's dense linear_sum_assignment over the pairs given,
with duals that certify it; a warm start gives the same optimum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernels.sparse_assign import sparse_assignment, unassigned_price


def scipy_objective(cost: np.ndarray) -> tuple[int, float]:
    """(orders assigned, summed cost) of the dense optimum, as ``assign`` defines it."""
    from scipy.optimize import linear_sum_assignment

    finite = np.isfinite(cost)
    if not finite.any():
        return 0, 0.0
    big = float(np.abs(cost[finite]).max() + 1.0) * (min(cost.shape) + 1)
    rows, cols = linear_sum_assignment(np.where(finite, cost, big))
    keep = finite[rows, cols]
    return int(keep.sum()), float(cost[rows[keep], cols[keep]].sum())


def objective(cost: np.ndarray, rider_of: np.ndarray) -> tuple[int, float]:
    got = np.nonzero(rider_of >= 0)[0]
    return len(got), float(cost[rider_of[got], got].sum())


def check(cost: np.ndarray, **kwargs) -> None:
    """The sparse answer over the finite pairs: optimal, riders used once, duals feasible
    (reduced costs >= 0, v <= 0, v = 0 on free riders, tight on the chosen pairs)."""
    n_riders, n_orders = cost.shape
    rider, order = np.nonzero(np.isfinite(cost))
    got = sparse_assignment(rider, order, cost[rider, order], n_riders, n_orders, **kwargs)
    used = got.rider_of[got.rider_of >= 0]
    assert len(set(used.tolist())) == used.size
    n, c = objective(cost, got.rider_of)
    want_n, want_c = scipy_objective(cost)
    assert n == want_n
    assert c == pytest.approx(want_c, rel=1e-9, abs=1e-6)
    if rider.size:
        reduced = cost[rider, order] - got.u[order] - got.v[rider]
        assert reduced.min() >= -1e-6
    assert (got.v <= 0).all()
    free = np.setdiff1d(np.arange(n_riders), used)
    assert np.all(got.v[free] == 0)
    chosen = np.nonzero(got.rider_of >= 0)[0]
    tight = cost[got.rider_of[chosen], chosen] - got.u[chosen] - got.v[got.rider_of[chosen]]
    assert np.allclose(tight, 0, atol=1e-6)


def random_cost(seed: int, n_riders: int, n_orders: int, ties: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    cost = rng.uniform(0, 3000, (n_riders, n_orders))
    if ties:
        cost = np.round(cost / 500.0) * 500.0
    cost[rng.random(cost.shape) < rng.uniform(0, 0.95)] = np.inf
    return cost


@given(
    seed=st.integers(0, 2**31 - 1),
    n_riders=st.integers(0, 12),
    n_orders=st.integers(0, 12),
    ties=st.booleans(),
)
def test_optimal_with_certifying_duals(seed, n_riders, n_orders, ties):
    check(random_cost(seed, n_riders, n_orders, ties))


@pytest.mark.parametrize(
    "cost",
    [
        pytest.param(np.full((3, 4), np.inf), id="all-infeasible"),
        pytest.param(np.array([[5.0, 1.0, 3.0]]), id="one-rider-three-orders"),
        pytest.param(np.array([[5.0], [1.0], [3.0]]), id="three-riders-one-order"),
        pytest.param(np.full((5, 5), 7.0), id="all-tied"),
        pytest.param(
            np.where(np.eye(6, dtype=bool)[:, :4], 1.0, np.inf), id="more-riders-diagonal"
        ),
        pytest.param(
            np.hstack([np.ones((4, 3)), np.full((4, 2), np.inf)]), id="infeasible-columns"
        ),
        pytest.param(random_cost(3, 40, 90, False), id="more-orders-than-riders"),
    ],
)
def test_adversarial_shapes(cost):
    check(cost)


def test_a_dispatch_round_with_its_infeasible_pairs():
    """A generated round's first pass (about 60% of pairs feasible), pairs given sparsely."""
    from kernels.insertion_costs import insertion_costs
    from planner import generate_round, pack_round

    packed = pack_round(generate_round(150, 60, seed=3))
    cost = insertion_costs(packed.routes, packed.orders, late_weight=4.0).cost.astype(np.float64)
    check(cost)


@given(seed=st.integers(0, 2**31 - 1), n_riders=st.integers(1, 10), n_orders=st.integers(1, 10))
def test_a_warm_start_from_any_duals_gives_the_optimum(seed, n_riders, n_orders):
    """Column duals from elsewhere (here random, <= 0) only change the path to the answer."""
    from kernels.sparse_assign import SparseAssignment

    cost = random_cost(seed, n_riders, n_orders, ties=seed % 2 == 0)
    rng = np.random.default_rng(seed)
    duals = -rng.uniform(0, 3000, n_riders + n_orders) * (rng.random(n_riders + n_orders) < 0.5)
    warm = SparseAssignment(
        rider_of=np.zeros(0, np.int64),
        u=np.zeros(0),
        v=duals[:n_riders],
        unassigned_cost=1.0,
        column_duals=duals,
    )
    check(cost, warm=warm)


@given(
    seed=st.integers(0, 2**31 - 1),
    n_riders=st.integers(1, 12),
    n_orders=st.integers(1, 12),
    kept=st.floats(0.0, 1.0),
    ties=st.booleans(),
)
def test_a_warm_start_from_the_answer_over_fewer_pairs_gives_the_optimum(
    seed, n_riders, n_orders, kept, ties
):
    """The answer over some of the pairs, re-solved from its matching once the rest join (as
    ``certified_assign`` adds pairs): the optimum over all, with certifying duals."""
    cost = random_cost(seed, n_riders, n_orders, ties)
    rider, order = np.nonzero(np.isfinite(cost))
    some = np.random.default_rng(seed).random(rider.size) < kept
    r, o = rider[some], order[some]
    warm = sparse_assignment(r, o, cost[r, o], n_riders, n_orders)
    check(cost, warm=warm)


def test_a_warm_start_on_a_dispatch_rounds_solves():
    """The three solves of a generated round's certified pass, each from the one before."""
    from kernels.certified_assign import DeviceCosts, certified_assign
    from kernels.insertion_costs import insertion_costs
    from planner import generate_round, pack_round

    packed = pack_round(generate_round(400, 150, seed=5))
    cost = insertion_costs(packed.routes, packed.orders, late_weight=4.0).cost.astype(np.float64)
    costs = DeviceCosts(cost)
    got = certified_assign(costs, costs.price, first=4)
    assert got is not None and got.solves >= 2
    assert objective(cost, got.rider_of) == pytest.approx(scipy_objective(cost))
    rider, order = np.nonzero(np.isfinite(cost))
    for kept in (0.2, 0.5, 0.9):
        some = np.random.default_rng(7).random(rider.size) < kept
        r, o = rider[some], order[some]
        check(cost, warm=sparse_assignment(r, o, cost[r, o], *cost.shape))


def test_unassigned_price_beats_any_saving():
    cost = np.array([1.0, 2.0, 3.0])
    assert unassigned_price(cost, 3, 3) > cost.sum()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="finite"):
        sparse_assignment(np.array([0]), np.array([0]), np.array([np.inf]), 1, 1)
    with pytest.raises(ValueError, match="out of range"):
        sparse_assignment(np.array([1]), np.array([0]), np.array([1.0]), 1, 1)
    with pytest.raises(ValueError, match="one length"):
        sparse_assignment(np.array([0, 0]), np.array([0]), np.array([1.0]), 1, 1)
