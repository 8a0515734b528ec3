"""improve: relocating orders never makes a route worse or infeasible, and keeps every stop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kernels._improve_cuda import KERNEL_NAME, kernel_parameters, launch_values, source
from kernels.arrays import STOP_ARRAYS, RouteArrays
from kernels.improve import improve, route_cost
from kernels.schedule import schedule
from planner import generate_round, pack_round
from tests.kernels.cuda_host import build_improve_harness, compile_ptx, run_improve_harness


def same_routes(a: RouteArrays, a_owner, b: RouteArrays, b_owner) -> bool:
    return all(
        np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True) for name in STOP_ARRAYS
    ) and np.array_equal(a_owner, b_owner)


def rounds(n: int):
    """(routes, owner, rows, late_weight): generated routes, every other one improved."""
    for seed in range(n):
        packed = pack_round(generate_round(60, 0, seed=seed, route_stops=(2, 12)))
        rows = np.arange(seed % 2, packed.routes.shape[0], 2)
        yield packed.routes, packed.owner, rows, (0.0, 4.0)[seed % 2]


def precedence_ok(routes, owner) -> bool:
    for r in range(routes.shape[0]):
        seen_drop = set()
        for q in range(int(routes.n_stops[r])):
            key = int(owner[r, q])
            if routes.stop_load[r, q] > 0 and key in seen_drop:
                return False
            if routes.stop_load[r, q] < 0:
                seen_drop.add(key)
    return True


@given(seed=st.integers(0, 10_000), w=st.sampled_from([0.0, 4.0]))
def test_improve_never_worse_never_infeasible(seed, w):
    packed = pack_round(generate_round(40, 0, seed=seed, route_stops=(2, 12)))
    owner = packed.owner
    before = route_cost(packed.routes, w)
    feasible_before = schedule(packed.routes).feasible
    routes, new_owner, _moves = improve(packed.routes, owner, late_weight=w)
    after = route_cost(routes, w)
    assert np.all(after <= before + 1e-3)
    assert np.all(schedule(routes).feasible | ~feasible_before)
    assert np.array_equal(routes.n_stops, packed.routes.n_stops)
    assert sorted(new_owner[new_owner >= 0].tolist()) == sorted(owner[owner >= 0].tolist())
    assert precedence_ok(routes, new_owner)


def test_improve_finds_moves_on_nearest_neighbour_routes():
    """Greedy routes leave room: some relocations should pay off."""
    packed = pack_round(generate_round(200, 0, seed=3, route_stops=(6, 12)))
    owner = packed.owner
    routes, _, moves = improve(packed.routes, owner, late_weight=4.0)
    assert moves > 0
    assert float(route_cost(routes, 4.0).sum()) < float(route_cost(packed.routes, 4.0).sum())


def test_the_compiled_search_makes_the_array_loops_moves():
    """One compiled call per batch of routes (``_improve_jit``) ends where the array loop ends,
    route for route, and leaves the routes it was not asked to improve alone."""
    for routes, owner, rows, w in rounds(8):
        loop = improve(routes, owner, late_weight=w, rows=rows, method="loop")
        jit = improve(routes, owner, late_weight=w, rows=rows, method="jit")
        assert jit[2] == loop[2] > 0
        assert same_routes(jit[0], jit[1], loop[0], loop[1])


def test_methods_are_checked():
    routes, owner, _, _ = next(rounds(1))
    with pytest.raises(ValueError, match="CuPy arrays only"):
        improve(routes, owner, late_weight=1.0, method="cuda")
    with pytest.raises(ValueError, match="unknown method"):
        improve(routes, owner, late_weight=1.0, method="fast")


def test_the_launcher_supplies_every_kernel_parameter():
    """``orml_improve``'s parameters, read from the ``.cu``, are exactly what the launcher
    builds (checked here with NumPy standing in for CuPy)."""
    routes, owner, rows, _ = next(rounds(1))
    values = launch_values(routes, owner, rows, 1.0, 2, 1e-2, np)
    assert set(values) == set(kernel_parameters())
    assert len(kernel_parameters()) == len(set(kernel_parameters()))


@pytest.mark.nvcc
def test_the_cuda_search_compiles_for_hopper_and_turing(tmp_path: Path):
    unit = tmp_path / "improve_unit.cu"
    unit.write_text(source())
    for ptx in compile_ptx(unit, tmp_path).values():
        assert KERNEL_NAME in ptx


@pytest.mark.nvcc
def test_the_cuda_search_on_the_host_is_bit_equal_to_the_compiled_one(tmp_path: Path):
    """``improve.cu``'s route search, built for the CPU, gives the compiled twin's routes bit
    for bit."""
    exe = build_improve_harness(tmp_path)
    for i, (routes, owner, rows, w) in enumerate(rounds(6)):
        cuda, cuda_owner, moves = run_improve_harness(
            exe, tmp_path / str(i), routes, owner, rows, w
        )
        jit = improve(routes, owner, late_weight=w, rows=rows, method="jit")
        assert int(moves.sum()) == jit[2]
        assert same_routes(cuda, cuda_owner, jit[0], jit[1])


def test_one_launch_on_a_device_is_bit_equal_to_the_compiled_search(device):
    cupy = device

    for routes, owner, rows, w in rounds(6):
        dev = improve(
            routes.to(cupy),
            cupy.asarray(owner),
            late_weight=w,
            rows=cupy.asarray(rows),
            method="cuda",
        )
        jit = improve(routes, owner, late_weight=w, rows=rows, method="jit")
        assert dev[2] == jit[2]
        assert same_routes(dev[0].to(np), cupy.asnumpy(dev[1]), jit[0], jit[1])
