"""One source per setting: the app's arguments win, this process's environment fills in what
they leave unset, and each merge happens in one place."""

from __future__ import annotations

import pytest

from config import Settings, backend_for, get_settings
from kernels.backend import backend_for_pairs, cupy_available, resolve_backend
from serve_app.cache_setup import build_cache
from serve_app.config import CacheArgs, DispatchAppArgs


@pytest.fixture
def env(monkeypatch):
    """Set ``ORML_*`` variables for one test; the process's settings are read again."""

    def set_env(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(f"ORML_{name.upper()}", value)
        get_settings.cache_clear()

    yield set_env
    get_settings.cache_clear()


def test_an_unset_backend_in_the_app_is_the_replicas_orml_backend(env):
    env(backend="numpy")
    assert DispatchAppArgs().backend is None
    assert resolve_backend(backend_for(DispatchAppArgs().backend)) == "numpy"


@pytest.mark.skipif(cupy_available(), reason="needs a machine without a working CUDA device")
def test_orml_backend_is_read_when_served_and_a_forced_cupy_fails_loudly(env):
    env(backend="cupy")
    with pytest.raises(RuntimeError, match="no working CUDA device"):
        resolve_backend(backend_for(DispatchAppArgs().backend))
    configured = DispatchAppArgs(backend="numpy").backend
    assert resolve_backend(backend_for(configured)) == "numpy"  # the config wins


def test_the_redis_url_comes_from_the_config_else_the_environment(env):
    env(redis_url="redis://127.0.0.1:1/0")
    assert build_cache(CacheArgs()).redis_url == "redis://127.0.0.1:1/0"
    assert build_cache(CacheArgs(redis_url="redis://127.0.0.1:2/0")).redis_url.endswith(":2/0")
    env(redis_url="")
    assert not build_cache(CacheArgs()).redis_url  # L1 only


def test_auto_keeps_rounds_under_gpu_min_pairs_on_the_host():
    # (device the process resolved to, chosen by "auto", pairs, gpu_min_pairs) -> backend
    assert backend_for_pairs("cupy", True, 30_000, 500_000) == "numpy"
    assert backend_for_pairs("cupy", True, 500_000, 500_000) == "cupy"
    assert backend_for_pairs("cupy", True, 30_000, 0) == "cupy"  # 0: every round on the GPU
    assert backend_for_pairs("cupy", False, 30_000, 500_000) == "cupy"  # a forced "cupy"
    assert backend_for_pairs("numpy", True, 10**9, 500_000) == "numpy"


def test_gpu_min_pairs_is_read_from_the_environment_and_validated(env):
    assert get_settings().gpu_min_pairs == Settings.model_fields["gpu_min_pairs"].default
    env(gpu_min_pairs="0")
    assert get_settings().gpu_min_pairs == 0
    env(gpu_min_pairs="-1")
    with pytest.raises(ValueError, match="gpu_min_pairs"):
        get_settings()
