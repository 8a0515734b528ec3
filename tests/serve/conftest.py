"""One local Ray + Serve for the whole test session (never on port 6379), torn down at the end."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from serve_app.config import DispatchAppArgs, Limits

LIMITS = Limits(max_body_bytes=2 << 20, max_riders=300, max_orders=200, max_route_stops=16)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def serve_url() -> Iterator[str]:
    ray = pytest.importorskip("ray")
    from ray import serve

    from serve_app.builder import app_builder
    from serve_app.launch import apply_process_env

    apply_process_env()  # as `orml serve` runs it
    ray.init(
        address="local",
        num_cpus=4,
        include_dashboard=False,
        log_to_driver=False,
        namespace="orml-tests",
    )
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", limits=LIMITS)
    serve.run(app_builder(args), name="orml", route_prefix="/")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
