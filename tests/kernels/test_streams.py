"""Traffic classes on CUDA streams: the priorities given, and the same answers on every stream."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from domain import DispatchWeights
from kernels.streams import class_stream
from planner import generate_round
from planner.dispatch_round import round_arrays, solve_round


def test_on_numpy_a_class_stream_changes_nothing():
    _, arrays = round_arrays(generate_round(40, 12, seed=3))
    plain = solve_round(arrays, DispatchWeights())
    with class_stream(np, online=False):
        low = solve_round(arrays, DispatchWeights())
    assert np.array_equal(plain.rider_of, low.rider_of)


@pytest.mark.gpu
def test_online_streams_have_the_greatest_priority_offline_the_least():
    from kernels.streams import priority_range, stream_for, stream_priority

    least, greatest = priority_range()
    assert greatest < least  # every GPU we place on (compute capability >= 3.5) has a range
    got = {online: stream_priority(stream_for(online)) for online in (True, False)}
    assert got == {True: greatest, False: least}
    assert stream_for(True) is stream_for(True)  # one per thread and class
    other: list = []
    thread = threading.Thread(target=lambda: other.append(stream_for(True)))
    thread.start()
    thread.join()
    assert other[0] is not stream_for(True)


@pytest.mark.gpu
def test_a_round_solved_on_either_class_stream_is_the_one_solved_on_the_default():
    import cupy

    _, arrays = round_arrays(generate_round(300, 100, seed=4))
    weights = DispatchWeights()
    want = solve_round(arrays.to(cupy), weights)
    for online in (True, False):
        with class_stream(cupy, online=online):
            assert cupy.cuda.get_current_stream() != cupy.cuda.Stream.null
            got = solve_round(arrays.to(cupy), weights)
        assert np.array_equal(got.rider_of, want.rider_of)
        assert np.array_equal(got.cost, want.cost)
