"""``pair_scan.cu``: each order's k cheapest riders and the pairs below the duals, on the device,
give the pairs their host twins give (``_pair_scan_jit``), in the same order; the source
compiles for the cards we place on without a GPU. Each device test runs on a GPU and on the
CPU's CuPy stand-in (its launchers for real, the kernels as the stand-in's emulators)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kernels._pair_scan_cuda import SOURCE
from kernels._pair_scan_jit import below_parallel, below_serial, smallest_serial
from kernels.certified_assign import ABS_TOL, REL_TOL, DeviceCosts, HostBounds, certified_assign
from tests.kernels.cuda_host import compile_ptx


def prices(seed: int, max_riders: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32[R, O] (R up to ``max_riders``, O up to 300) with ties (prices on a 10 s grid)
    and infeasible pairs, and duals u float64[O], v float64[R] (<= 0) cutting through them."""
    rng = np.random.default_rng(seed)
    n_riders, n_orders = int(rng.integers(1, max_riders)), int(rng.integers(1, 300))
    cost = np.round(rng.uniform(0, 3000, (n_riders, n_orders)), -1).astype(np.float32)
    cost[rng.random(cost.shape) < 0.3] = np.inf
    return cost, rng.uniform(0, 3000, n_orders), -rng.uniform(0, 500, n_riders)


def _scan_case(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A bounds matrix from 1 x 1 to past the parallel size gate, with ties, infinities,
    rows with no pair below the duals, rows with every pair below, and bounds exactly at
    the threshold or within the tolerance of it."""
    rng = np.random.default_rng(seed)
    big = seed % 10 == 0
    n_riders = int(rng.integers(300, 700)) if big else int(rng.integers(1, 40))
    n_orders = int(rng.integers(300, 700)) if big else int(rng.integers(1, 40))
    bound = np.round(rng.uniform(0, 300, (n_riders, n_orders)), -1).astype(np.float32)
    bound[rng.random(bound.shape) < 0.2] = np.inf
    u = np.round(rng.uniform(0, 300, n_orders), -1)
    v = -np.round(rng.uniform(0, 100, n_riders), -1)
    v[rng.random(n_riders) < 0.3] = -1e9  # rows with nothing below
    v[rng.random(n_riders) < 0.1] = 1e9  # rows with every finite pair below
    at = rng.random(bound.shape) < 0.1  # on the threshold, or just inside the tolerance
    nudge = rng.choice([0.0, ABS_TOL / 2, -ABS_TOL / 2], size=bound.shape)
    exact = (u[None, :] + v[:, None] + nudge).astype(np.float32)
    bound[at & (np.abs(exact) < 1e6)] = exact[at & (np.abs(exact) < 1e6)]
    return bound, u, v


@pytest.mark.parametrize("build", [below_serial, below_parallel], ids=["serial", "parallel"])
def test_the_pairs_below_the_duals_are_every_such_pair_in_row_order(build):
    """Against NumPy's reading of the same test (``emulators._under``), on 300 seeded cases:
    every pair, rows in order and columns in order within a row; past the cap nothing but
    the count (a cap at the count writes them all, one under it returns the count alone)."""
    from tests.kernels.emulators import _under

    for seed in range(300):
        bound, u, v = _scan_case(seed)
        want_r, want_c = np.nonzero(_under(bound, u[None, :] + v[:, None], ABS_TOL, REL_TOL))
        n = want_r.size
        rows, cols, count = build(bound, u, v, ABS_TOL, REL_TOL, n)
        assert count == n and np.array_equal(rows, want_r) and np.array_equal(cols, want_c), seed
        if n:
            rows, cols, count = build(bound, u, v, ABS_TOL, REL_TOL, n - 1)
            assert count == n and rows.size == cols.size == 0, seed


@pytest.mark.nvcc
def test_the_scans_compile_for_hopper_and_turing(tmp_path: Path):
    for ptx in compile_ptx(SOURCE, tmp_path).values():
        assert "orml_top_candidates" in ptx and "orml_below_duals" in ptx


@pytest.mark.parametrize("seed", range(6))
def test_top_candidates_on_the_device_are_the_host_scans(device, seed):
    from kernels._pair_scan_cuda import top_candidates_cuda

    cupy = device

    cost, u, v = prices(seed, 700)
    n_orders = cost.shape[1]
    bound_t = cupy.asarray(np.ascontiguousarray(cost.T))
    none = np.zeros(0)
    for k in (1, 7, 96):
        want = smallest_serial(cost, k, none, none, ABS_TOL, REL_TOL)
        got = top_candidates_cuda(bound_t, k, None, None, None, ABS_TOL, REL_TOL)
        assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True)), k
    rng = np.random.default_rng(seed)
    orders = np.sort(rng.choice(n_orders, size=max(1, n_orders // 3), replace=False))
    sub = np.ascontiguousarray(cost[:, orders])
    rows, cols = smallest_serial(sub, 5, u[orders], v, ABS_TOL, REL_TOL)
    got = top_candidates_cuda(bound_t, 5, orders, u, v, ABS_TOL, REL_TOL)
    assert np.array_equal(got[0], rows) and np.array_equal(got[1], orders[cols])


@pytest.mark.parametrize("seed", range(6))
def test_pairs_below_the_duals_on_the_device_are_the_host_scans(device, seed):
    from kernels._pair_scan_cuda import below_duals_cuda

    cupy = device

    cost, u, v = prices(seed, 900)
    rows, cols, count = below_serial(cost, u, v, ABS_TOL, REL_TOL, cost.size)
    bound_t = cupy.asarray(np.ascontiguousarray(cost.T))
    n, rider, order = below_duals_cuda(bound_t, u, v, ABS_TOL, REL_TOL, cost.size)
    assert n == count
    assert np.array_equal(rider, rows) and np.array_equal(order, cols)
    n, rider, order = below_duals_cuda(bound_t, u, v, ABS_TOL, REL_TOL, max(0, count - 1))
    assert n == count and (rider.size == 0 or count == 0)


def test_a_certified_pass_over_device_prices_is_the_host_twins_answer(device):
    from kernels.insertion_costs import insertion_costs
    from planner import generate_round, pack_round

    packed = pack_round(generate_round(700, 250, seed=9))
    cost = insertion_costs(packed.routes, packed.orders, late_weight=4.0).cost
    on_device = DeviceCosts(device.asarray(cost))
    host = DeviceCosts(cost)
    assert isinstance(host._host, HostBounds)
    got = certified_assign(on_device, on_device.price, first=24)
    want = certified_assign(host, host.price, first=24)
    assert got is not None and want is not None
    assert np.array_equal(got.rider_of, want.rider_of)
    assert got.priced == want.priced and got.solves == want.solves
