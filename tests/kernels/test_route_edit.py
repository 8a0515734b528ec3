"""Inserting orders' stops into routes: the CUDA kernel (``route_edit.cu``, one thread per edited
route) and its compiled CPU twin (``_route_edit_jit``) against the array code, through nvcc on
the host, and on a device (a GPU, and the CPU's CuPy stand-in, which runs the launcher for
real)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kernels import compiled
from kernels._route_edit_cuda import SOURCE, kernel_parameters, launch_values
from kernels.arrays import OrderArrays, RouteArrays
from kernels.route_edit import _grow, insert_orders
from planner import generate_round
from planner.round_to_arrays import pack_round
from tests.kernels.cuda_host import build_route_edit_harness, compile_ptx, run_route_edit_harness


def edits(n: int):
    """n seeded edits of generated rounds: (routes, owner, rows, orders, index, pickup_pos,
    dropoff_pos, keys), ``orders[index[k]]`` into route ``rows[k]``; some orders already picked
    up (a drop-off alone), positions anywhere in the route before the edit."""
    for seed in range(n):
        rng = np.random.default_rng(seed)
        packed = pack_round(generate_round(60, 40, seed=seed, route_stops=(0, 6)))
        routes, owner = packed.routes, packed.owner
        k = int(rng.integers(1, 30))
        rows = np.sort(rng.choice(routes.shape[0], k, replace=False)).astype(np.int64)
        has_pickup = rng.random(len(packed.orders)) < 0.7
        orders = replace(packed.orders, has_pickup=has_pickup).check()
        index = rng.integers(0, len(orders), k).astype(np.int64)
        stops = routes.n_stops[rows]
        pickup = np.array([rng.integers(0, s + 1) for s in stops], np.int32)
        dropoff = np.array(
            [
                rng.integers(p if h else 0, s + 1)
                for p, s, h in zip(pickup, stops, has_pickup[index], strict=True)
            ],
            np.int32,
        )
        keys = rng.integers(0, 500, k).astype(np.int32)
        yield routes, owner, rows, orders, index, pickup, dropoff, keys


FIELDS = RouteArrays.__dataclass_fields__


def same(a: tuple[RouteArrays, np.ndarray], b: tuple[RouteArrays, np.ndarray]) -> bool:
    """Bit for bit: every array of the routes, and the owners."""
    names = RouteArrays.__dataclass_fields__
    return (
        all(
            np.asarray(getattr(a[0], n)).tobytes() == np.asarray(getattr(b[0], n)).tobytes()
            for n in names
        )
        and np.asarray(a[1]).tobytes() == np.asarray(b[1]).tobytes()
    )


def test_the_launcher_supplies_every_kernel_parameter():
    routes, owner, rows, orders, index, pickup, dropoff, keys = next(edits(1))
    values = launch_values(routes, owner, rows, orders, index, pickup, dropoff, keys, np)
    assert set(kernel_parameters()) == set(values)


def test_methods_are_checked():
    routes, owner, rows, orders, index, pickup, dropoff, keys = next(edits(1))
    taken = orders.take(index)
    with pytest.raises(ValueError, match="CuPy"):
        insert_orders(routes, owner, rows, taken, pickup, dropoff, keys, method="cuda")
    with pytest.raises(ValueError, match="unknown method"):
        insert_orders(routes, owner, rows, taken, pickup, dropoff, keys, method="fast")


def test_the_compiled_twin_is_bit_equal_to_the_array_code_and_leaves_its_inputs():
    """The twin of the CUDA kernel on the CPU, 200 seeded edits (drop-offs alone among them),
    read-only inputs as a Ray replica receives them; "auto" takes it once the builds are in."""
    for routes, owner, rows, orders, index, pickup, dropoff, keys in edits(200):
        want = insert_orders(
            routes, owner, rows, orders.take(index), pickup, dropoff, keys, method="loop"
        )
        before = (RouteArrays(**{n: getattr(routes, n).copy() for n in FIELDS}), owner.copy())
        frozen = [a.copy() for a in (rows, index, pickup, dropoff, keys)]
        for a in frozen:
            a.setflags(write=False)
        r, i, p, d, k = frozen
        got = insert_orders(routes, owner, r, orders, p, d, k, method="jit", order_index=i)
        assert same(got, want)
        assert same((routes, owner), before)
    assert not compiled.warming()
    got = insert_orders(routes, owner, rows, orders.take(index), pickup, dropoff, keys)
    assert same(got, want)


def test_an_order_index_reads_the_orders_where_they_are():
    for routes, owner, rows, orders, index, pickup, dropoff, keys in edits(10):
        want = insert_orders(routes, owner, rows, orders.take(index), pickup, dropoff, keys)
        got = insert_orders(routes, owner, rows, orders, pickup, dropoff, keys, order_index=index)
        assert same(got, want)


@pytest.mark.nvcc
def test_the_cuda_insertion_compiles_for_hopper_and_turing(tmp_path: Path):
    for ptx in compile_ptx(SOURCE, tmp_path).values():
        assert ".entry orml_insert_orders" in ptx


@pytest.mark.nvcc
def test_the_cuda_insertion_on_the_host_is_bit_equal_to_the_array_code(tmp_path: Path):
    exe = build_route_edit_harness(tmp_path)
    for i, (routes, owner, rows, orders, index, pickup, dropoff, keys) in enumerate(edits(200)):
        want = insert_orders(
            routes, owner, rows, orders.take(index), pickup, dropoff, keys, method="loop"
        )
        grown, grown_owner = _grow(routes, owner, int((routes.n_stops[rows] + 2).max()))
        values = launch_values(grown, grown_owner, rows, orders, index, pickup, dropoff, keys, np)
        inputs = {
            name: values[name]
            for name in (
                "rows",
                "order_of",
                *OrderArrays.__dataclass_fields__,
                "pickup_pos",
                "dropoff_pos",
                "keys",
            )
        }
        got = run_route_edit_harness(exe, tmp_path / str(i), grown, grown_owner, inputs)
        assert same(got, want), f"edit {i}"


def test_one_launch_on_a_device_is_bit_equal_to_the_array_code_and_leaves_its_inputs(device):
    cupy = device
    for routes, owner, rows, orders, index, pickup, dropoff, keys in edits(20):
        want = insert_orders(routes, owner, rows, orders.take(index), pickup, dropoff, keys)
        dev_routes, dev_owner = routes.to(cupy), cupy.asarray(owner)
        got = insert_orders(
            dev_routes,
            dev_owner,
            cupy.asarray(rows),
            orders.to(cupy),
            cupy.asarray(pickup),
            cupy.asarray(dropoff),
            cupy.asarray(keys),
            method="cuda",
            order_index=cupy.asarray(index),
        )
        assert same((got[0].to(np), cupy.asnumpy(got[1])), want)
        assert same((dev_routes.to(np), cupy.asnumpy(dev_owner)), (routes, owner))
