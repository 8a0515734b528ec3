"""``device``: the CuPy a device test runs on, twice where it can: the real one on a GPU
(``gpu``-marked, skipped without one) and the CPU's stand-in (``counting_cupy``: the
launchers and the host's side for real, the kernels as their host twins)."""

from __future__ import annotations

import warnings

import pytest

from .counting_cupy import installed


@pytest.fixture(params=[pytest.param("gpu", marks=pytest.mark.gpu), "stand-in"])
def device(request):
    if request.param == "gpu":
        import cupy

        yield cupy
        return
    with installed() as cupy, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # inf - inf in the scans' twins
        yield cupy
