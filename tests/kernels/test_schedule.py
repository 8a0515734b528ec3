"""schedule: vectorised route simulation equals the plain-Python simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernels._reference import _route, simulate
from kernels.schedule import Schedule, route_totals, schedule
from tests.kernels.cases import random_batch


@given(seed=st.integers(0, 2**31 - 1), n_routes=st.integers(0, 8), n_slots=st.integers(1, 9))
def test_schedule_equals_python_simulation(seed, n_routes, n_slots):
    """Arrivals, driving time, lateness and load per stop match a straight simulation."""
    routes, _ = random_batch(seed, n_routes, 0, n_slots)
    got = schedule(routes)
    for r in range(n_routes):
        stops = _route(routes, r)
        arrivals, travel, late = simulate(routes, r, stops)
        n = len(stops)
        np.testing.assert_allclose(got.arrival[r, :n], arrivals, rtol=1e-5, atol=1e-2)
        assert np.all(np.isnan(got.arrival[r, n:]))
        assert math.isclose(float(got.travel[r]), travel, rel_tol=1e-5, abs_tol=1e-2)
        assert math.isclose(float(got.total_lateness[r]), late, rel_tol=1e-5, abs_tol=1e-2)
        load = float(routes.load0[r]) + np.cumsum([s.load for s in stops])
        np.testing.assert_allclose(got.load[r, :n], load, atol=1e-5)


def test_waiting_for_food_delays_departure():
    """A pickup reached before the food is ready departs at ready + service."""
    routes, _ = random_batch(0, 1, 0, 1)
    routes.n_stops[:] = 1
    routes.insert_limit[:] = 1
    routes.start_xy[:] = 0
    routes.start_time[:] = 0
    routes.speed[:] = 10.0
    routes.stop_xy[0, 0] = [100.0, 0.0]
    routes.stop_ready[0, 0] = 500.0
    routes.stop_service[0, 0] = 60.0
    routes.stop_load[0, 0] = 1.0
    routes.capacity[:] = 1.0
    routes.load0[:] = 0.0
    got = schedule(routes.check())
    assert float(got.arrival[0, 0]) == 10.0
    assert float(got.departure[0, 0]) == 560.0
    assert float(got.duration[0]) == 560.0
    assert bool(got.feasible[0])


@given(seed=st.integers(0, 2**31 - 1), n_routes=st.integers(0, 12), n_slots=st.integers(1, 14))
def test_compiled_loop_is_bit_equal_to_the_array_loop(seed, n_routes, n_slots):
    """The compiled twin (``kernels._schedule_jit``) answers exactly what the array loop does,
    NaN padding included, so "auto" may pick either."""
    routes, _ = random_batch(seed, n_routes, 0, n_slots)
    loop, jit = schedule(routes, method="loop"), schedule(routes, method="jit")
    for name in Schedule.__dataclass_fields__:
        a, b = getattr(loop, name), getattr(jit, name)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        assert np.array_equal(a, b, equal_nan=True), name


def test_compiled_loop_on_served_rounds_and_bad_methods():
    """The same on rounds as the generator makes them, up to 1000 riders; an unknown method is
    refused."""
    from planner import generate_round
    from planner.dispatch_round import round_arrays

    for seed, (riders, orders) in enumerate([(100, 20), (1000, 300), (1, 0), (0, 3)]):
        _, arrays = round_arrays(generate_round(riders, orders, seed=seed))
        loop, jit = schedule(arrays.routes, method="loop"), schedule(arrays.routes, method="jit")
        for name in Schedule.__dataclass_fields__:
            assert np.array_equal(getattr(loop, name), getattr(jit, name), equal_nan=True), name
    routes, _ = random_batch(0, 2, 0, 3)
    with pytest.raises(ValueError, match="unknown method"):
        schedule(routes, method="fast")


def test_the_cuda_walks_need_cupy_arrays():
    from kernels.insertion_costs import route_context

    routes, _ = random_batch(0, 2, 0, 3)
    with pytest.raises(ValueError, match="CuPy arrays only"):
        schedule(routes, method="cuda")
    with pytest.raises(ValueError, match="CuPy arrays only"):
        route_context(routes, method="cuda")
    with pytest.raises(ValueError, match="unknown method"):
        route_context(routes, method="fast")


@pytest.mark.parametrize("seed", range(6))
def test_the_cuda_walk_is_bit_equal_to_the_array_loop(device, seed):
    """One thread per route (``orml_schedule_walk``) answers what the array loop does on the
    same device, NaN padding included, on adversarial batches and generated rounds."""
    cupy = device

    from planner import generate_round
    from planner.dispatch_round import round_arrays

    batches = [random_batch(seed, 40, 0, 1 + 2 * seed)[0]]
    batches.append(round_arrays(generate_round(300 * (seed + 1), 50, seed=seed))[1].routes)
    for routes in batches:
        dev = routes.to(cupy)
        loop, cuda = schedule(dev, method="loop"), schedule(dev, method="cuda")
        for name in Schedule.__dataclass_fields__:
            a, b = getattr(loop, name).get(), getattr(cuda, name).get()
            assert a.dtype == b.dtype and a.shape == b.shape, name
            assert np.array_equal(a, b, equal_nan=True), name


@pytest.mark.parametrize("seed", range(4))
def test_the_totals_a_solve_reads_are_the_schedules(seed):
    routes, _ = random_batch(seed, 50, 0, 1 + 3 * seed)
    full = schedule(routes)
    arrival, travel, lateness = route_totals(routes)
    for got, want in (
        (arrival, full.arrival),
        (travel, full.travel),
        (lateness, full.total_lateness),
    ):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
