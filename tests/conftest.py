"""Session-wide test settings: hypothesis profiles, the gpu/nvcc skips, a private Redis."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from ops.local import RedisProcess

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


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    if not RedisProcess.available():
        pytest.skip("redis-server is not installed (apt-get install -y redis-server)")
    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def redis_url(redis_server: RedisProcess) -> str:
    import redis

    if not redis_server.running():
        redis_server.start()
    redis_server.resume()
    redis.Redis.from_url(redis_server.url).flushall()
    return redis_server.url
