"""Session-wide test settings: hypothesis profiles, the gpu/nvcc skips, the tiers, a private
Redis.

The tiers (markers, given here from what a test uses, never by hand):

* ``system``: the test starts processes of its own: an ``orml serve``, a Ray cluster, a
  browser, Prometheus, a Node client, ``serve deploy`` (the modules in ``SYSTEM``);
* ``integration``: it uses the session's shared app (``serve_endpoints``) or a real Redis
  (``redis_server``);
* ``unit``: everything else. A unit test starts nothing: ``ray.init`` raises in it, as in Ray
  Serve's own unit tests, so a unit that reaches for a cluster is found, not slowed down.

``pytest -m unit`` is the fast tier; ``pytest -m "not system"`` adds the shared app.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from ops.redis_process import RedisProcess

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=15, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


#: Modules whose tests start processes of their own (clusters, launchers, browsers, servers).
SYSTEM = frozenset(
    {
        "tests/test_orml_serve.py",
        "tests/test_readme.py",
        "tests/test_dashboard.py",
        "tests/serve/test_deploy.py",
        "tests/serve/test_chaos.py",
        "tests/serve/test_multi_node.py",
        "tests/serve/test_grpc_node.py",
        "tests/serve/test_prometheus.py",
        "tests/serve/test_ray_dashboard.py",
        "tests/serve/test_scheduling_serve.py",
        "tests/serve/test_model_roll.py",
        "tests/serve/test_haproxy_config.py",
        "tests/placement/test_placement.py",
    }
)
#: Fixtures that reach the session's shared cluster and app.
CLUSTER = frozenset({"serve_endpoints", "serve_url", "grpc_address"})
#: Fixtures that reach the session's shared app or a real Redis.
SHARED = CLUSTER | {"redis_server", "redis_url"}
#: Where the shared cluster's fixture leaves what stops it (an ExitStack), so that the last test
#: that uses the cluster can stop it before the system tier starts clusters of its own.
SHARED_CLUSTER = pytest.StashKey[contextlib.ExitStack]()


def _tier(item: pytest.Item) -> str:
    path = item.path.relative_to(item.config.rootpath).as_posix()
    if path in SYSTEM:
        return "system"
    if SHARED & set(getattr(item, "fixturenames", ())):
        return "integration"
    return "unit"


def _uses_cluster(item: pytest.Item) -> bool:
    return bool(CLUSTER & set(getattr(item, "fixturenames", ())))


def _run_order(items: list[pytest.Item]) -> dict[Path, int]:
    """Each module's place in the run: units first, then every module that uses the shared
    cluster (so it runs once, its tests together), then Redis's, then the system tier, whose
    clusters and servers then start on a machine no idle cluster shares (an idle shared
    cluster costs about a third of a core). A module keeps its tests together and in order:
    split, its module fixtures would start twice."""
    tiers: dict[Path, set[str]] = {}
    cluster: set[Path] = set()
    for item in items:
        tiers.setdefault(item.path, set()).add(_tier(item))
        if _uses_cluster(item):
            cluster.add(item.path)
    return {
        path: 1 if path in cluster else 3 if "system" in t else 2 if "integration" in t else 0
        for path, t in tiers.items()
    }


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from kernels.backend import cupy_available

    for item in items:
        item.add_marker(_tier(item))
    place = _run_order(items)
    items.sort(key=lambda item: place[item.path])  # stable: each module's order kept

    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU with CuPy; none is usable here")
    no_nvcc = pytest.mark.skip(reason="needs nvcc on PATH")
    have_gpu = cupy_available()
    have_nvcc = shutil.which("nvcc") is not None
    for item in items:
        if "gpu" in item.keywords and not have_gpu:
            item.add_marker(no_gpu)
        if "nvcc" in item.keywords and not have_nvcc:
            item.add_marker(no_nvcc)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last test that uses the shared cluster (of those selected), and after its
    fixtures' own teardown (a module's app deleted from the cluster), stop the cluster."""
    yield
    if nextitem is None or not _uses_cluster(item) or _uses_cluster(nextitem):
        return
    rest = item.session.items[item.session.items.index(nextitem) :]
    if not any(_uses_cluster(later) for later in rest):
        stack = item.config.stash.get(SHARED_CLUSTER, None)
        if stack is not None:
            stack.close()


def _ray_if_installed():
    try:
        import ray
    except ModuleNotFoundError:
        return None
    return ray


@pytest.fixture(autouse=True)
def _compiled_builds_left_as_found() -> Iterator[None]:
    """A replica built in this process defers the compiled builds (``kernels.compiled.defer``)
    for the whole process; left so, every later test would run the array loops (a PDPTW
    solve 30x slower: lr211 ran into its 300 s limit)."""
    from kernels import compiled

    was = compiled.warming()
    yield
    if not was:
        compiled.resume()


@pytest.fixture(autouse=True)
def _units_start_no_cluster(request: pytest.FixtureRequest) -> Iterator[None]:
    """In a unit test, starting Ray raises (the tier's promise: it starts nothing). Where Ray
    is not installed (the GPU machine runs the kernel tests alone) there is nothing to refuse."""
    ray = None if request.node.get_closest_marker("unit") is None else _ray_if_installed()
    if ray is None:
        yield
        return

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError(
            "a unit test started Ray: use the session's app (serve_endpoints) or move the "
            "test's module to tests/conftest.py SYSTEM"
        )

    saved = ray.init
    ray.init = refuse  # type: ignore[assignment]
    try:
        yield
    finally:
        ray.init = saved  # type: ignore[assignment]


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
