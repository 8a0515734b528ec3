"""``kernels.bare_pointer.data_pointer``: an array's data as a pointer that compiled code
reads and writes like the array, and that only C-contiguous arrays give."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit
from numba.core.errors import TypingError

from kernels.bare_pointer import data_pointer


@njit(cache=False)
def _double_each(values):
    p = data_pointer(values)
    for k in range(len(values)):
        p[k] = 2 * p[k]
    return p[len(values) - 1]


@njit(cache=False)
def _total(values):
    p = data_pointer(values)
    total = 0
    for k in range(len(values)):
        total += p[k]
    return total


def test_a_pointer_reads_and_writes_the_arrays_data():
    for dtype in (np.float64, np.int64, np.uint8):
        values = np.arange(1, 6, dtype=dtype)
        assert _double_each(values) == 10
        assert values.tolist() == [2, 4, 6, 8, 10]
    # A read-only array (a request's bytes) gives a pointer to read through too.
    assert _total(np.frombuffer(b"\x01\x02\x03", np.uint8)) == 6


def test_only_a_c_contiguous_array_gives_a_pointer():
    with pytest.raises(TypingError):
        _double_each(np.arange(10.0)[::2])
