"""insertion_lower_bounds: never above the exact price, in both builds, on adversarial batches
(late stops, hard deadlines, full boxes, depot ends, orders on board) and generated rounds."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernels.certified_assign import ABS_TOL, REL_TOL, bound_tolerance
from kernels.insertion_bounds import insertion_lower_bounds
from kernels.insertion_costs import insertion_costs
from planner.dispatch_round import etr_adjusted_cost
from tests.kernels.cases import random_batch


def exact(routes, orders, late_weight, floor):
    ins = insertion_costs(routes, orders, late_weight=late_weight)
    return ins.cost if floor is None else etr_adjusted_cost(ins, orders.due, floor, late_weight)


def assert_below(bound, cost):
    """float32 sums in another order (and fastmath in the compiled build) may put a bound past
    the exact price by rounding, never by more than the certificate allows for."""
    both = np.isfinite(cost)
    assert np.all(bound[both] - bound_tolerance(bound[both]) <= cost[both])
    # where the bound says infeasible, so does the price
    assert not np.any(np.isinf(bound) & both)


@pytest.mark.parametrize("method", ["loop", "jit"])
@given(
    seed=st.integers(0, 2**31 - 1),
    n_routes=st.integers(1, 12),
    n_orders=st.integers(1, 12),
    n_slots=st.integers(1, 7),
    tight=st.booleans(),
    late_weight=st.sampled_from([0.0, 1.0, 4.0]),
    with_floor=st.booleans(),
)
def test_bound_never_passes_the_price(
    method, seed, n_routes, n_orders, n_slots, tight, late_weight, with_floor
):
    routes, orders = random_batch(seed, n_routes, n_orders, n_slots, tight=tight)
    floor = None
    if with_floor:
        floor = np.random.default_rng(seed).uniform(0, 3000, n_orders).astype(np.float32)
    bound = insertion_lower_bounds(
        routes, orders, late_weight=late_weight, etr_floor=floor, method=method
    )
    assert bound.shape == (n_routes, n_orders) and bound.dtype == np.float32
    assert_below(bound, exact(routes, orders, late_weight, floor))


@pytest.mark.parametrize("seed", range(4))
def test_builds_agree_and_bound_a_generated_round(seed):
    from planner import generate_round, pack_round

    packed = pack_round(generate_round(120, 50, seed=seed))
    routes, orders = packed.routes, packed.orders
    jit = insertion_lower_bounds(routes, orders, late_weight=4.0, method="jit")
    loop = insertion_lower_bounds(routes, orders, late_weight=4.0, method="loop")
    both = np.isfinite(jit) & np.isfinite(loop)
    assert np.mean(np.isfinite(jit) == np.isfinite(loop)) > 0.999
    assert np.allclose(jit[both], loop[both], rtol=REL_TOL, atol=ABS_TOL)
    cost = exact(routes, orders, 4.0, None)
    assert_below(jit, cost)
    # and it is worth computing: most pairs' bound is well above zero
    assert np.mean(jit[np.isfinite(jit)] > 60.0) > 0.5


def test_orders_on_board_are_not_bounded_and_bad_input_is_refused():
    routes, orders = random_batch(1, 3, 4, 3)
    bound = insertion_lower_bounds(routes, orders, late_weight=1.0)
    assert np.all(bound[:, ~orders.has_pickup] == 0)
    with pytest.raises(ValueError, match="unknown method"):
        insertion_lower_bounds(routes, orders, late_weight=1.0, method="cuda")
    with pytest.raises(ValueError, match="etr_floor"):
        insertion_lower_bounds(routes, orders, late_weight=1.0, etr_floor=np.zeros(9))


def test_a_replicas_read_only_arrays_need_no_second_compile():
    """Ray hands a replica read-only arrays; the warm-up compiles that one specialisation."""
    from kernels._insertion_bounds_jit import lower_bounds_parallel, lower_bounds_serial, warm_up

    warm_up()
    before = len(lower_bounds_serial.signatures) + len(lower_bounds_parallel.signatures)
    routes, orders = random_batch(2, 4, 3, 3)
    for batch in (routes, orders):
        for name in batch.__dataclass_fields__:
            getattr(batch, name).flags.writeable = False
    for parallel in (False, True):
        insertion_lower_bounds(routes, orders, late_weight=1.0, method="jit", parallel=parallel)
    after = len(lower_bounds_serial.signatures) + len(lower_bounds_parallel.signatures)
    assert after == before
