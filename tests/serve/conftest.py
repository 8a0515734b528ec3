"""One local Ray + Serve for the whole test session, started as `orml serve` starts it (the
shared harness, Serve's throughput mode), never on port 6379, torn down at the end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from ops import local
from ops.local import LocalServe
from ops.ports import free_port
from serve_app.config import DispatchAppArgs, Limits
from tests.conftest import SHARED_CLUSTER

LIMITS = Limits(max_body_bytes=2 << 20, max_riders=300, max_orders=300, max_route_stops=16)
ARGS = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", limits=LIMITS)

__all__ = ["ARGS", "LIMITS", "free_port"]


@pytest.fixture(scope="session")
def serve_endpoints(request: pytest.FixtureRequest) -> Iterator[LocalServe]:
    pytest.importorskip("ray")
    # The stack is left where tests/conftest.py stops it after the last test that uses it.
    with contextlib.ExitStack() as stack:
        request.config.stash[SHARED_CLUSTER] = stack
        # With the dashboard: tests/serve/test_ray_dashboard.py opens it in a real browser.
        endpoints = stack.enter_context(
            local.local_serve(num_cpus=4, namespace="orml-tests", dashboard_port=free_port())
        )
        local.run_app(ARGS)
        local.wait_ready(endpoints.http)
        yield endpoints


@pytest.fixture(scope="session")
def serve_url(serve_endpoints: LocalServe) -> str:
    return serve_endpoints.http


@pytest.fixture(scope="session")
def grpc_address(serve_endpoints: LocalServe) -> str:
    return serve_endpoints.grpc
