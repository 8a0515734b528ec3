"""The compiled CPU kernels let other Python threads run while they compute (Numba ``nogil``).

A solver replica serves online and offline rounds from threads of one process, beside its event
loop: a kernel that held the GIL for a big offline round's assignment (about a second) stalled
every online round and health check in the replica for that long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from planner import generate_round, pack_round


def longest_stall_during(call: Callable[[], object]) -> tuple[float, float]:
    """(the longest this thread went without a Python step while ``call`` ran in another
    thread, how long ``call`` took), seconds. A call that holds the GIL stalls this thread for
    all of its compiled part."""
    done = threading.Event()
    took: list[float] = []

    def run() -> None:
        t0 = time.perf_counter()
        call()
        took.append(time.perf_counter() - t0)
        done.set()

    worker = threading.Thread(target=run)
    longest, last = 0.0, time.perf_counter()
    worker.start()  # this thread keeps stepping from before the call starts until it ends
    while not done.is_set():
        now = time.perf_counter()
        longest, last = max(longest, now - last), now
    worker.join()
    return longest, took[0]


def test_the_compiled_assignment_releases_the_gil():
    from kernels._assign_jit import shortest_augmenting_path_jit

    cost = np.random.default_rng(0).uniform(0, 1000, (2000, 2000))
    shortest_augmenting_path_jit(cost[:5, :5].copy())  # compiled (or loaded) first
    stall, took = longest_stall_during(lambda: shortest_augmenting_path_jit(cost))
    assert took > 0.03 and stall < 0.5 * took, (stall, took)


@pytest.mark.parametrize("parallel", [False, True])
def test_the_compiled_pricing_releases_the_gil(parallel):
    from kernels._insertion_costs_jit import insertion_costs_jit, route_context_jit

    packed = pack_round(generate_round(2500, 500, seed=3))
    routes, orders = packed.routes, packed.orders
    ctx = route_context_jit(routes)
    insertion_costs_jit(routes, orders, ctx, 4.0, False, parallel)  # compiled first
    stall, took = longest_stall_during(
        lambda: insertion_costs_jit(routes, orders, ctx, 4.0, False, parallel)
    )
    assert took > 0.03 and stall < 0.5 * took, (stall, took)
