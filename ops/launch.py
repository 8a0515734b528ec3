"""Run deploy.yaml on a local Ray: what ``orml serve`` does (and ``serve run`` does inside Ray).

Ray starts through the shared harness (``ops.local``: never on port 6379, which
Redis uses; Serve's throughput mode), the config is fitted to the CPUs and GPUs Ray sees
(``ops.sizing``) and deployed, and ``launch`` returns once every application runs
and answers /readyz.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ops import local, ports


class Interrupted(Exception):
    """The start was asked to stop (SIGTERM or SIGINT) before the app was ready."""


class StartProgress:
    """What a start is doing and for how long, told through ``say`` (a line each): every step
    as it begins, a wait's state whenever it changes, and the last line again ("still") once
    ``every_s`` passed without one, from a thread of its own, so a step that blocks (Ray's
    start) is told too. ``close`` ends that thread."""

    def __init__(self, say: Callable[[str], None], every_s: float = 4.0) -> None:
        self._say, self.every_s = say, every_s
        self.started = time.monotonic()
        self._last_at, self._last = time.monotonic(), ""
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._ticker: threading.Thread | None = None

    def step(self, msg: str) -> None:
        with self._lock:
            self._tell(msg)
        if self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, name="orml-start", daemon=True)
            self._ticker.start()

    def waiting(self, state: str) -> None:
        """``state`` of a wait, told when it changed (the ticker repeats it)."""
        if state != self._last:
            self.step(state)

    def close(self) -> None:
        """End the ticker and wait for it (no thread of ours left running into an exit)."""
        self._done.set()
        if self._ticker is not None:
            self._ticker.join()

    def _tell(self, msg: str) -> None:
        self._last_at, self._last = time.monotonic(), msg
        self._say(f"[{time.monotonic() - self.started:5.1f} s] {msg}")

    def _tick(self) -> None:
        while not self._done.wait(0.25):
            with self._lock:
                if time.monotonic() - self._last_at >= self.every_s and not self._done.is_set():
                    self._tell(self._last.removesuffix(" (still)") + " (still)")


def deployments_state(app: Any) -> str:
    """'Ingress 1/1, OrSolver 0/1 (STARTING 1), Etr 1/1': each deployment's running
    replicas (Serve's ``ApplicationStatusOverview``)."""
    parts = []
    for name, dep in (app.deployments or {}).items():
        states = {str(k).rsplit(".", 1)[-1]: v for k, v in (dep.replica_states or {}).items()}
        running, total = states.get("RUNNING", 0), sum(states.values())
        others = ", ".join(f"{k} {v}" for k, v in states.items() if k != "RUNNING")
        parts.append(f"{name} {running}/{total}" + (f" ({others})" if others else ""))
    return ", ".join(parts) or "no deployments yet"


def readiness_state(why: dict[str, Any]) -> str:
    """What /readyz's answer says the app still waits for, in words."""
    if "reason" in why:
        return str(why["reason"])
    waits = []
    solver, etr = why.get("or_solver") or {}, why.get("etr") or {}
    if solver.get("kernel_warming"):
        stage = solver.get("kernel_stage") or "starting"
        waits.append(f"the solver's compiled kernels: {stage} (Numba; cached for later starts)")
    elif not solver.get("healthy", True):
        waits.append("the solver's device check")
    if not etr.get("healthy", True):
        waits.append("the ETR model loading")
    if (why.get("ingress") or {}).get("round_reader") == "loading":
        waits.append("the ingress's gRPC round reader (Numba; cached for later starts)")
    return "waiting for " + " and ".join(waits) if waits else "ready"


class _DropRayNoise(logging.Filter):
    """Ray's start-up lines that say nothing to act on here: the token warning (the dashboard
    line says how to log in) and the Ray address file being rewritten (this start records its
    own, on purpose)."""

    NOISE = ("Token authentication is enabled", "Overwriting previous Ray address")

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.NOISE)


def quiet_ray_start_noise() -> None:
    """Drop ``_DropRayNoise``'s lines from Ray's loggers in this process."""
    for name in ("ray._private.authentication.authentication_token_setup", "ray._private.utils"):
        logging.getLogger(name).addFilter(_DropRayNoise())


@dataclass(frozen=True)
class Launched:
    """Where the app answers (``local.LocalServe``) and what sizing changed in the config."""

    endpoints: local.LocalServe
    notes: list[str]
    cache: str = ""  # where the result cache keeps its L2, in words (``cache_decision``)


def _raw_config(
    path: Path, port: int | None, grpc_port: int | None, host: str | None = None
) -> dict[str, Any]:
    raw = yaml.safe_load(path.read_text())
    if host is not None:
        raw.setdefault("http_options", {})["host"] = host
    if port is not None:
        raw.setdefault("http_options", {})["port"] = port
    if grpc_port is not None:
        raw.setdefault("grpc_options", {})["port"] = grpc_port
    return raw


def launch(
    config_path: Path,
    *,
    throughput_mode: bool = True,
    host: str | None = None,
    port: int | None = None,
    grpc_port: int | None = None,
    dashboard_port: int = 8265,
    metrics_port: int = 8080,
    num_cpus: int | None = None,
    timeout_s: float = 180.0,
    stop: local.StopRequest | None = None,
    progress: StartProgress | None = None,
) -> Launched:
    """Start Ray (dashboard on 127.0.0.1), deploy the config fitted to this machine, wait
    until it runs and is ready, telling ``progress`` each step and, while waiting, each
    state. RuntimeError when a port is taken or the deploy fails; Interrupted as soon as
    ``stop`` is set (what has started is left for ``local.stop``)."""
    stop = stop or local.StopRequest()
    progress = progress or StartProgress(lambda _msg: None)
    try:
        return _launch(
            config_path,
            throughput_mode,
            host,
            port,
            grpc_port,
            dashboard_port,
            metrics_port,
            num_cpus,
            timeout_s,
            stop,
            progress,
        )
    finally:
        progress.close()


def _launch(
    config_path: Path,
    throughput_mode: bool,
    host: str | None,
    port: int | None,
    grpc_port: int | None,
    dashboard_port: int,
    metrics_port: int,
    num_cpus: int | None,
    timeout_s: float,
    stop: local.StopRequest,
    progress: StartProgress,
) -> Launched:
    local.import_ray_keeping_signals()  # first: a SIGTERM during ray.init must stop, not abort
    import ray
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    from ops.sizing import fit_to_machine

    raw = _raw_config(config_path, port, grpc_port, host)
    ServeDeploySchema.model_validate(raw)  # fail on a bad file before starting anything
    http = raw.get("http_options", {})
    grpc = raw.get("grpc_options", {})
    http_port, grpc_port = int(http.get("port", 8000)), int(grpc.get("port", 9000))
    ports.check_ports_free(
        {
            "HTTP": http_port,
            "gRPC": grpc_port,
            "dashboard": dashboard_port,
            "metrics": metrics_port,
        }
    )
    _interruptible(stop)
    progress.step("starting Ray ...")
    endpoints = local.start(
        num_cpus=num_cpus,
        throughput_mode=throughput_mode,
        http_host=http.get("host", "0.0.0.0"),
        http_port=http_port,
        grpc_port=grpc_port,
        grpc_servicers=grpc.get("grpc_servicer_functions") or local.GRPC_SERVICERS,
        haproxy_lanes=app_lanes(raw),
        dashboard_port=dashboard_port,
        metrics_port=metrics_port,
    )
    # Recorded where `ray start` records its cluster, so ray.init(address="auto") and the
    # `ray`/`serve` CLIs find this one even when other local Ray instances run.
    from ray._private.utils import write_ray_address

    write_ray_address(ray.get_runtime_context().gcs_address)
    _interruptible(stop)
    resources = ray.cluster_resources()
    progress.step(
        f"Ray is up ({resources.get('CPU', 0):.0f} CPUs, {resources.get('GPU', 0):.0f} GPUs); "
        f"the app will answer at {endpoints.http} (HTTP) and {endpoints.grpc} (gRPC) once "
        "ready"
    )
    fitted, notes = fit_to_machine(raw, resources.get("CPU", 1.0), resources.get("GPU", 0.0))
    config = ServeDeploySchema.model_validate(fitted)
    _get_global_client().deploy_apps(config, _blocking=False)
    progress.step(f"deploying {', '.join(a.name for a in config.applications)} ...")
    deadline = time.monotonic() + timeout_s
    wait_running([a.name for a in config.applications], timeout_s, stop, progress)
    for app in config.applications:
        _interruptible(stop)
        local.wait_ready(
            endpoints.http + (app.route_prefix or "/"),
            max(1.0, deadline - time.monotonic()),
            stop=stop,
            on_wait=lambda why: progress.waiting(readiness_state(why)),
        )
    progress.step("ready")
    _interruptible(stop)
    return Launched(endpoints, notes, cache_decision(raw))


def cache_decision(raw: dict[str, Any]) -> str:
    """Where the orml app's result cache keeps its entries, as the replicas will decide it:
    ``args.cache.redis_url``, else ``ORML_REDIS_URL`` in this environment (which the
    replicas inherit), else each replica's own memory."""
    from urllib.parse import urlsplit

    from config import get_settings

    for app in raw.get("applications", []):
        cache = (app.get("args") or {}).get("cache") or {}
        if cache.get("enabled") is False:
            return "off (args.cache.enabled: false)"
        url = cache.get("redis_url") or get_settings().redis_url
        if url:
            where = urlsplit(url)
            return f"L1 in each replica + Redis L2 at {where.hostname}:{where.port or 6379}"
    return "L1 in each replica only (no L2: set ORML_REDIS_URL or args.cache.redis_url)"


def _interruptible(stop: local.StopRequest) -> None:
    if stop.is_set():
        raise Interrupted


def app_lanes(raw: dict[str, Any]) -> dict[str, int]:
    """The admission lanes' capacities of the config's orml app, per POST path (what HAProxy
    lets through to an Ingress replica: ``ops.haproxy_config``); {} without one."""
    from serve_app.config import DispatchAppArgs
    from serve_app.http.routes import lane_capacities

    for app in raw.get("applications", []):
        if app.get("import_path") == "serve_app.builder:app_builder":
            return lane_capacities(DispatchAppArgs(**(app.get("args") or {})).admission)
    return {}


def wait_running(
    names: list[str],
    timeout_s: float,
    stop: local.StopRequest | None = None,
    progress: StartProgress | None = None,
) -> None:
    """Block until every named application is RUNNING, telling ``progress`` the replicas'
    states; RuntimeError on failure or timeout, Interrupted once ``stop`` is set."""
    from ray import serve

    deadline = time.monotonic() + timeout_s
    while True:
        _interruptible(stop or local.StopRequest())
        apps = serve.status().applications
        states = {n: (apps[n].status if n in apps else "MISSING") for n in names}
        if all(s == "RUNNING" for s in states.values()):
            return
        failed = {n: apps[n].message for n, s in states.items() if s == "DEPLOY_FAILED"}
        if failed:
            raise RuntimeError(f"deploy failed: {failed}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"applications not running after {timeout_s} s: {states}")
        if progress is not None:
            progress.waiting(
                "replicas starting: "
                + "; ".join(deployments_state(apps[n]) for n in names if n in apps)
            )
        time.sleep(0.5)
