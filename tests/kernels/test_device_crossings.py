"""A GPU round run on the CPU (``counting_cupy``: CuPy's rules of crossing over NumPy, the
kernels as their host twins): it plans what the NumPy round plans, and it crosses between the
host and the device only where the round's design says it does.

The counts held here are the round's today: the round in one copy and the answer in one; per
pass, the picks in one copy each way (their routes' lengths with them: how far the routes
grow is known on the host, no scalar is read); per step of
the certificate's search, the duals in and the pairs under them out (their count first), the
chosen riders out, and the prices of the pairs it asks for. What still crosses inside a pass is
the host's sparse solve (its pairs and prices): the device assignment is what removes it."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import pytest

from domain import DispatchWeights
from kernels.backend import cupy_available
from kernels.transfers import to_device, to_host
from planner import dispatch_round, generate_round
from planner.dispatch_round import DEVICE_FIRST_PAIRS, round_arrays

from .counting_cupy import CROSSINGS, DeviceArray, installed


@pytest.fixture
def stand_in():
    with installed() as cupy, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf in the scans' twins
        cupy_available()  # the backend's probe of the device: once a process, not the round's
        CROSSINGS.reset()
        yield cupy


def _plan(round_, backend):
    plan = dispatch_round(round_, backend=backend)
    return plan, {a.order_id: a.rider_id for a in plan.assignments}


@pytest.mark.parametrize(
    ("riders", "orders", "per_rider"),
    [(300, 100, 1), (1000, 300, 1), (40, 90, 1), (300, 600, 3)],
)
def test_the_gpu_round_plans_what_the_host_round_plans(stand_in, riders, orders, per_rider):
    round_ = generate_round(
        riders, orders, seed=2, weights=DispatchWeights(max_orders_per_rider=per_rider)
    )
    host, host_picks = _plan(round_, "numpy")
    gpu, gpu_picks = _plan(round_, "cupy")
    assert gpu.backend == "cupy" and host.backend == "numpy"
    assert gpu_picks == host_picks
    assert gpu.cost.total == host.cost.total
    assert gpu.routes == host.routes


@pytest.mark.parametrize("variant", ["etr_floor", "candidate_riders", "dense", "max_route_stops"])
def test_every_kind_of_gpu_pass_plans_what_the_host_plans(stand_in, variant):
    weights = {
        "candidate_riders": DispatchWeights(candidate_riders=8),
        "max_route_stops": DispatchWeights(max_route_stops=6, max_orders_per_rider=2),
    }.get(variant, DispatchWeights())
    round_ = generate_round(200, 150, seed=4, weights=weights)
    kwargs = {
        "etr_floor": {"etr_minutes": np.random.default_rng(4).uniform(5, 40, 150)},
        "dense": {"dense": True},
    }.get(variant, {})
    plans = [dispatch_round(round_, backend=b, **kwargs) for b in ("numpy", "cupy")]
    picks = [{a.order_id: a.rider_id for a in p.assignments} for p in plans]
    assert plans[1].backend == "cupy" and picks[0] == picks[1]
    assert plans[0].cost.total == plans[1].cost.total
    assert plans[0].routes == plans[1].routes


def test_a_pass_crosses_in_one_copy_each_way(stand_in):
    round_ = generate_round(1000, 300, seed=2)
    _, arrays = round_arrays(round_)
    plan, _ = _plan(round_, "cupy")
    assert len(plan.assignments) == 300  # one pass assigns every order
    assert CROSSINGS.by_file() == Counter(
        {
            # In: the round, the certificate's first pairs (priced and forgotten), the
            # duals, the picks (to gather, to insert), the changed rows: each one copy.
            ("h2d", "kernels/transfers.py"): 6,
            # Out: the picks' entries (with their routes' lengths), the pairs under the duals,
            # the answer: each one copy; the pair scans' chosen riders and count; the priced
            # pairs. No other host sync.
            ("d2h", "kernels/transfers.py"): 3,
            ("d2h", "kernels/_pair_scan_cuda.py"): 2,
            ("d2h", "kernels/backend.py"): 1,
        }
    )
    # The stages are timed by events on the device's stream, read once at the end.
    assert CROSSINGS.waits == 1
    # The bytes in are the round and the first pairs' index (int64 rider and order, 96 a
    # order); the rest are a few kilobytes. The answer is smaller than the round.
    first_pairs = 300 * DEVICE_FIRST_PAIRS * 16
    assert arrays.nbytes + first_pairs <= CROSSINGS.h2d_bytes <= arrays.nbytes + first_pairs + 2**15
    assert CROSSINGS.d2h_bytes < arrays.nbytes


def test_each_further_pass_adds_the_same_crossings(stand_in):
    counts = {}
    for per_rider in (1, 3):
        CROSSINGS.reset()
        round_ = generate_round(
            300, 600, seed=2, weights=DispatchWeights(max_orders_per_rider=per_rider)
        )
        _plan(round_, "cupy")
        counts[per_rider] = (CROSSINGS.h2d, CROSSINGS.d2h, CROSSINGS.syncs)
    one, two = counts[1], counts[3]  # 600 orders on 300 riders: one pass, then two
    assert one[2] == two[2] == 0  # no scalar read in any pass
    assert all(two[i] > one[i] for i in range(2))
    assert CROSSINGS.by_file()[("h2d", "kernels/transfers.py")] == CROSSINGS.h2d


def test_device_arrays_keep_cupys_rules(stand_in):
    a = stand_in.asarray(np.arange(4, dtype=np.float32))
    assert CROSSINGS.h2d == 1
    with pytest.raises(TypeError):
        np.asarray(a)
    with pytest.raises(TypeError):
        _ = a + np.ones(4, np.float32)  # no host array in a device operation
    total = (a * 2).sum()
    assert isinstance(total, DeviceArray) and CROSSINGS.syncs == 0
    assert float(total) == 12.0 and CROSSINGS.syncs == 1
    _ = a[a > 1]  # a mask sizes its result by the data
    assert CROSSINGS.syncs == 2


@pytest.mark.parametrize("module", ["numpy", "device"])
def test_a_batch_crosses_in_one_copy_and_lands_whole(stand_in, module):
    xp = np if module == "numpy" else stand_in
    host = [
        np.arange(6, dtype=np.float32).reshape(2, 3),
        np.array([True, False, True]),
        np.arange(5, dtype=np.int64)[::2],  # not contiguous
        np.zeros((0, 2), np.float32),
        np.float64(2.5) * np.ones((), np.float64),
        np.array([1, -2, 3], np.int32),
    ]
    CROSSINGS.reset()
    moved = to_device(host, xp)
    back = to_host(moved, xp)
    for before, after in zip(host, back, strict=True):
        assert after.dtype == before.dtype and after.shape == before.shape
        np.testing.assert_array_equal(after, before)
    assert (CROSSINGS.h2d, CROSSINGS.d2h) == ((0, 0) if xp is np else (1, 1))


def test_seeded_batches_of_every_dtype_and_shape_cross_whole_both_ways(stand_in):
    dtypes = (np.float64, np.int64, np.float32, np.int32, np.bool_, np.uint8)
    for seed in range(300):
        rng = np.random.default_rng(seed)
        host = []
        for _ in range(int(rng.integers(1, 9))):
            dtype = dtypes[int(rng.integers(len(dtypes)))]
            shape = tuple(int(n) for n in rng.integers(0, 5, int(rng.integers(0, 4))))
            a = (rng.random(shape) * 1000).astype(dtype)
            host.append(a[::2] if a.ndim and rng.random() < 0.3 else a)  # some not contiguous
        CROSSINGS.reset()
        moved = to_device(host, stand_in)
        back = to_host([m * 1 if m.dtype != np.bool_ else m for m in moved], stand_in)
        assert (CROSSINGS.h2d, CROSSINGS.d2h) == (1, 1), seed
        for before, device, after in zip(host, moved, back, strict=True):
            assert device.shape == before.shape and device.dtype == before.dtype, seed
            assert after.dtype == before.dtype and after.shape == before.shape, seed
            np.testing.assert_array_equal(after, before)
