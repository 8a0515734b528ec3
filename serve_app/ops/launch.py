"""Run deploy.yaml on a local Ray: what ``orml serve`` does (and ``serve run`` does inside Ray).

Ray's GCS also defaults to port 6379, which Redis uses on these machines; a local ``ray.init``
picks a free port instead, and so does this launcher.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Urls:
    api: str
    docs: str
    dashboard: str
    metrics: str


def load_config(path: Path, port: int | None = None):  # -> ServeDeploySchema
    """Read and validate a Serve config file; raises pydantic.ValidationError naming the field."""
    from ray.serve.schema import ServeDeploySchema

    raw = yaml.safe_load(path.read_text())
    if port is not None:
        raw.setdefault("http_options", {})["port"] = port
    return ServeDeploySchema.model_validate(raw)


THROUGHPUT_ENV = {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1", "RAY_SERVE_ENABLE_HA_PROXY": "1"}
"""Ray Serve's high-throughput mode (Ray >= 2.55): an HAProxy ingress and direct gRPC between
replicas; 2-4x less latency per hop here (docs/benchmarks.md). With it, handles must be used
from async code."""


PROCESS_ENV = {"MALLOC_ARENA_MAX": "2"}
"""Set for Ray's processes (as defaults: the caller's environment wins). glibc gives each
thread that allocates its own malloc arena, up to 8 per core; with Ray's and Serve's threads
the ingress's RSS grew ~1 MB/min at 20 requests/s while its Python heap stayed flat, and two
arenas hold every process flat (``bench/soak.py``, docs/benchmarks.md). Read at process start:
on a cluster set it in the nodes' environment (``ray start``, the container image)."""


def apply_process_env() -> None:
    """Put ``PROCESS_ENV`` into this process's environment, for the Ray it starts to inherit."""
    import os

    for key, value in PROCESS_ENV.items():
        os.environ.setdefault(key, value)


def start(
    config_path: Path,
    *,
    throughput_mode: bool = True,
    port: int | None = None,
    dashboard_port: int = 8265,
    metrics_port: int = 8080,
    num_cpus: int | None = None,
    timeout_s: float = 180.0,
) -> Urls:
    """Start Ray (dashboard on 127.0.0.1), deploy the config, wait until it is RUNNING."""
    import os

    apply_process_env()
    if throughput_mode:
        os.environ.update(THROUGHPUT_ENV)  # read by Ray's processes, so set before ray.init
    import ray
    from ray.serve._private import api as serve_private
    from ray.serve.config import ProxyLocation

    config = load_config(config_path, port)
    ray.init(
        address="local",  # a new local cluster, never one recorded by an earlier `ray start`
        num_cpus=num_cpus,
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        dashboard_port=dashboard_port,
        namespace="serve",
        _metrics_export_port=metrics_port,
        log_to_driver=False,
    )
    client = serve_private.serve_start(
        http_options=config.http_options.model_dump(),
        proxy_location=ProxyLocation(config.proxy_location),
    )
    client.deploy_apps(config, _blocking=False)
    wait_running([a.name for a in config.applications], timeout_s)
    host = config.http_options.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    api = f"http://{host}:{config.http_options.port}"
    return Urls(
        api=api,
        docs=f"{api}/docs",
        dashboard=f"http://127.0.0.1:{dashboard_port}",
        metrics=f"http://127.0.0.1:{metrics_port}/metrics",
    )


def wait_running(names: list[str], timeout_s: float) -> None:
    """Block until every named application is RUNNING; RuntimeError on failure or timeout."""
    from ray import serve

    deadline = time.monotonic() + timeout_s
    while True:
        apps = serve.status().applications
        states = {n: (apps[n].status if n in apps else "MISSING") for n in names}
        if all(s == "RUNNING" for s in states.values()):
            return
        failed = {n: apps[n].message for n, s in states.items() if s == "DEPLOY_FAILED"}
        if failed:
            raise RuntimeError(f"deploy failed: {failed}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"applications not running after {timeout_s} s: {states}")
        time.sleep(0.5)
