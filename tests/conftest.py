"""Session-wide test settings: hypothesis profiles and the gpu/nvcc skips."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=15, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from kernels.backend import cupy_available

    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU with CuPy; none is usable here")
    no_nvcc = pytest.mark.skip(reason="needs nvcc on PATH")
    have_gpu = cupy_available()
    have_nvcc = shutil.which("nvcc") is not None
    for item in items:
        if "gpu" in item.keywords and not have_gpu:
            item.add_marker(no_gpu)
        if "nvcc" in item.keywords and not have_nvcc:
            item.add_marker(no_nvcc)
