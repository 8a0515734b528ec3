"""One local Ray + Serve for the whole test session, started as `orml serve` starts it (the
shared harness, Serve's throughput mode), never on port 6379, torn down at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ops import local
from ops.local import LocalServe
from ops.ports import free_port
from serve_app.config import DispatchAppArgs, Limits

LIMITS = Limits(max_body_bytes=2 << 20, max_riders=300, max_orders=300, max_route_stops=16)
ARGS = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", limits=LIMITS)

__all__ = ["ARGS", "LIMITS", "free_port"]


@pytest.fixture(scope="session")
def serve_endpoints() -> Iterator[LocalServe]:
    pytest.importorskip("ray")
    # With the dashboard: tests/serve/test_ray_dashboard.py opens it in a real browser.
    with local.local_serve(
        num_cpus=4, namespace="orml-tests", dashboard_port=free_port()
    ) as endpoints:
        local.run_app(ARGS)
        local.wait_ready(endpoints.http)
        yield endpoints


@pytest.fixture(scope="session")
def serve_url(serve_endpoints: LocalServe) -> str:
    return serve_endpoints.http


@pytest.fixture(scope="session")
def grpc_address(serve_endpoints: LocalServe) -> str:
    return serve_endpoints.grpc
