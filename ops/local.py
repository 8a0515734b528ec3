"""A local Ray + Serve, the one way tests, benches and ``orml serve`` start the app.

``start`` brings up Ray (never on port 6379, which Redis uses) and Serve with HTTP and gRPC
ingress; ``run_app`` deploys ``serve_app.builder.build_app`` (what deploy.yaml runs) under a
name and route prefix; ``stop`` shuts both down. Its ports come from ``ops.ports``; what it
leaves behind is ended through ``ops.processes``.

Serve's throughput mode (an HAProxy ingress, direct gRPC between replicas) is the default, as
in production. Its HAProxy has fixed stats/metrics ports and files under /tmp by default; each
local start gets its own free ports and directory, so two apps on one machine do not collide.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config.secrets import read_env
from ops import ports, processes

log = logging.getLogger("orml.serve")

THROUGHPUT_ENV = {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1", "RAY_SERVE_ENABLE_HA_PROXY": "1"}
"""Ray Serve's high-throughput mode (Ray >= 2.55): an HAProxy ingress and direct gRPC between
replicas, for less latency per hop (bench/serve_load.py)."""

LOCAL_DRAIN_ENV = {"RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2"}
"""In throughput mode Serve holds a stopping ingress replica open for 30 s so that an external
load balancer can deregister it; a local start has only its own HAProxy in front, which learns
in ~0.1 s, so 2 s is plenty (and stopping takes seconds, not 35). Clusters behind a cloud load
balancer keep Ray's default."""

METRICS_ENV = {"RAY_metrics_report_interval_ms": "2000"}
"""Ray's processes hand their metrics to the node's export every 10 s by default, so a request
showed in Prometheus up to 11 s after it was answered (with the ingress's 1 s flush); every 2 s
it shows within 5 s (``tests/serve/test_counts_arrive.py``). A Kubernetes cluster sets the
same variable on its pods (``orml k8s rayservice``)."""

AUTOSCALING_ENV = {"RAY_SERVE_COLLECT_AUTOSCALING_METRICS_ON_HANDLE": "0"}
"""Replicas report their own load to the controller. Ray 2.60 starts a replica's push of custom
autoscaling stats (our Busy, ``actors.autoscaling``) only when replicas collect their own
ongoing-request metric; with the handles collecting it (Ray's default) a replica whose
autoscaling config arrives after it starts never pushes them, and the Busy policy sees none."""


PROCESS_ENV = {"MALLOC_ARENA_MAX": "2"}
"""Set for Ray's processes (as defaults: the caller's environment wins). glibc gives each
thread that allocates its own malloc arena, up to 8 per core; with Ray's and Serve's threads
the ingress's RSS kept growing under steady load while its Python heap stayed flat, and two
arenas hold every process flat (``bench/soak.py``). Read at process start:
on a cluster set it in the nodes' environment (``ray start``, the container image)."""

PROXY_RESTART_TIMEOUT_S = 120.0
"""How long a start waits for Serve to replace a proxy that failed its readiness checks."""

GRPC_SERVICERS = [
    "serve_app.grpc_api.registration.add_orml_servicer",
    "serve_app.grpc_api.registration.add_inference_servicer",
]
"""What Serve's gRPC ingress serves (``grpc_options.grpc_servicer_functions`` in deploy.yaml)."""


def apply_process_env() -> None:
    """Put ``PROCESS_ENV`` into this process's environment, for the Ray it starts to inherit."""
    for key, value in PROCESS_ENV.items():
        os.environ.setdefault(key, value)


#: What Serve runs as HAProxy (``RAY_SERVE_HAPROXY_BINARY_PATH``): ``ops.haproxy_config``
#: rewrites Serve's generated config, then runs the real binary with the same arguments
#: (``haproxy -db -f CFG [-sf PIDS] [-x SOCK]``).
_HAPROXY_WRAPPER = """#!/bin/sh
exec {python} -m ops.haproxy_config "$@"
"""


def haproxy_env(
    workdir: Path,
    stats_port: int,
    metrics_port: int,
    lanes: Mapping[str, int | None] | None = None,
    http_host: str = "127.0.0.1",
) -> dict[str, str]:
    """Ports and private files for this start's HAProxy (see module doc); its stats page and
    metrics on 127.0.0.1 only, and ``lanes`` (path -> capacity, ``routes.
    lane_capacities``) shed in front of the ingress (``ops.haproxy_config``), sent to the
    Ingress replicas' own listeners bound on ``http_host`` (``serve_app.http.lean_listener``)."""
    from ray.serve._private.haproxy import get_haproxy_binary

    from ops.haproxy_config import LANES_ENV, REAL_BINARY_ENV, proxy_threads
    from serve_app.http.lean_listener import HOST_ENV, PORTS_DIR_ENV

    wrapper = workdir / "haproxy"
    wrapper.write_text(_HAPROXY_WRAPPER.format(python=sys.executable))
    wrapper.chmod(0o755)
    return {
        "RAY_SERVE_HAPROXY_BINARY_PATH": str(wrapper),
        REAL_BINARY_ENV: get_haproxy_binary(),
        LANES_ENV: json.dumps(dict(lanes or {})),
        # The Ingress replicas register their own listeners here (serve_app.http.lean_listener),
        # bound where Serve's listeners are.
        PORTS_DIR_ENV: str(workdir / "lean"),
        HOST_ENV: http_host,
        "RAY_SERVE_HAPROXY_STATS_PORT": str(stats_port),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(metrics_port),
        "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": str(workdir / "haproxy.cfg"),
        "RAY_SERVE_HAPROXY_SOCKET_PATH": str(workdir / "admin.sock"),
        "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": str(workdir),
        "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": str(workdir / "server-state"),
        # An operator's own setting stands.
        "RAY_SERVE_HAPROXY_NBTHREAD": read_env("RAY_SERVE_HAPROXY_NBTHREAD")
        or str(proxy_threads(len(os.sched_getaffinity(0)))),
    }


@contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@dataclass(frozen=True)
class LocalServe:
    """Where a local start answers: HTTP base URL, gRPC host:port, the dashboard (None when
    not started), the Prometheus metrics export, and the (HTTP, gRPC) ports of Serve's
    fallback proxy (None without HAProxy)."""

    http: str
    grpc: str
    dashboard: str | None
    metrics: str
    fallback_proxy: tuple[int, int] | None = None


def start(
    *,
    num_cpus: float | None = None,
    throughput_mode: bool = True,
    http_host: str = "127.0.0.1",
    http_port: int | None = None,
    grpc_port: int | None = None,
    dashboard_port: int | None = None,
    metrics_port: int | None = None,
    grpc_servicers: list[str] | None = None,
    haproxy_lanes: Mapping[str, int | None] | None = None,
    namespace: str = "serve",
    extra_env: Mapping[str, str] | None = None,
) -> LocalServe:
    """Start a local Ray and Serve (HTTP + gRPC ingress); ports default to free ones.

    dashboard_port : None starts no dashboard. grpc_servicers : what the gRPC ingress serves
    (default ``GRPC_SERVICERS``). haproxy_lanes : per POST path, the requests HAProxy lets
    through to an Ingress replica at once (``routes.lane_capacities``; None, or a path
    mapped to None: no limit at the proxy).
    extra_env : more environment for Ray's processes.
    """
    global _haproxy_dir
    import_ray_keeping_signals()
    _adopt_orphans()
    import ray
    from ray.serve.config import gRPCOptions

    apply_process_env()
    # Every port from the cluster's own block, below the ephemeral range: a port the kernel
    # called free there was once taken by an outgoing connection before HAProxy bound it.
    base = ports.cluster_port_block()
    http_port = http_port or base + ports.OWN_PORTS
    grpc_port = grpc_port or base + ports.OWN_PORTS + 1
    metrics_port = metrics_port or base + ports.OWN_PORTS + 2
    env: dict[str, str] = {**AUTOSCALING_ENV, **METRICS_ENV, **(extra_env or {})}
    fallback: dict[str, str] = {}
    if throughput_mode:
        env.update(THROUGHPUT_ENV)
        env.update(LOCAL_DRAIN_ENV)
        env.update(ports.direct_ingress_env(base))
        fallback = ports.fallback_proxy_env(base)
        env.update(fallback)
        _haproxy_dir = Path(tempfile.mkdtemp(prefix="orml-haproxy-"))
        _serve_dirs_before.clear()
        _serve_dirs_before.update(_serve_haproxy_dirs())
        haproxy_ports = (
            base + 2 * ports.DIRECT_INGRESS_BLOCK,
            base + 2 * ports.DIRECT_INGRESS_BLOCK + 1,
        )
        if haproxy_lanes is None:  # no shedding at the proxy; the lanes' own listeners still
            from serve_app.http.routes import LANE_OF_PATH

            haproxy_lanes = dict.fromkeys(LANE_OF_PATH)
        env.update(haproxy_env(_haproxy_dir, *haproxy_ports, haproxy_lanes, http_host))
    # Ray's processes inherit the environment of the raylet that ray.init starts; this process
    # keeps its own, so that processes it starts later (a second cluster, `ray start`) do not.
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    with _environment(env):
        ray.init(
            address="local",  # a new local cluster, never one an earlier `ray start` recorded
            num_cpus=num_cpus,
            include_dashboard=dashboard_port is not None,
            dashboard_host="127.0.0.1",
            dashboard_port=dashboard_port,
            namespace=namespace,
            _metrics_export_port=metrics_port,
            log_to_driver=False,
        )
        # ray.init replaced SIGTERM's handler with one that raises SystemExit: the caller's
        # own handlers (``orml serve`` stops cleanly on both signals) apply from here on.
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
        _started_ray_children[:] = _ray_children()
        _start_serve(
            http_options={"host": http_host, "port": http_port},
            grpc_options=gRPCOptions(
                port=grpc_port, grpc_servicer_functions=grpc_servicers or GRPC_SERVICERS
            ),
        )
    host = "127.0.0.1" if http_host in ("0.0.0.0", "::") else http_host
    return LocalServe(
        http=f"http://{host}:{http_port}",
        grpc=f"127.0.0.1:{grpc_port}",
        dashboard=None if dashboard_port is None else f"http://127.0.0.1:{dashboard_port}",
        metrics=f"http://127.0.0.1:{metrics_port}/metrics",
        fallback_proxy=(
            (int(fallback[ports.FALLBACK_HTTP]), int(fallback[ports.FALLBACK_GRPC]))
            if fallback
            else None
        ),
    )


def _start_serve(**options: Any) -> None:
    """``serve.start``, riding out a proxy that Serve replaced while it started.

    On a loaded host a new proxy can miss three readiness checks in a row (5 s each); Serve's
    controller then kills it and starts another, but ``serve.start``, waiting on the first
    one, raises its death (seen in CI with another job on the two cores: every test of the
    session then failed at setup). The controller is up by then, so wait for its proxies."""
    from ray import serve
    from ray.exceptions import RayActorError

    try:
        serve.start(**options)
        return
    except RayActorError as exc:
        log.warning("a Serve proxy was replaced while starting (%s); waiting for it", exc)
    deadline = time.monotonic() + PROXY_RESTART_TIMEOUT_S
    while time.monotonic() < deadline:
        proxies = serve.status().proxies
        if proxies and all(getattr(s, "value", s) == "HEALTHY" for s in proxies.values()):
            return
        time.sleep(0.5)
    raise RuntimeError(f"Serve's proxies were not healthy within {PROXY_RESTART_TIMEOUT_S} s")


def run_app(
    args: Any,
    options: Mapping[str, dict[str, Any]] | None = None,
    *,
    name: str = "orml",
    route_prefix: str = "/",
) -> None:
    """Deploy ``build_app(args, options)`` (``DispatchAppArgs`` or a dict) and wait until it
    runs."""
    from ray import serve

    from serve_app.builder import build_app

    serve.run(build_app(args, options), name=name, route_prefix=route_prefix)


class StopRequest:
    """A stop request that a signal handler may make: a plain flag. ``threading.Event.set``
    takes a lock, and a handler that runs while its own thread holds that lock (inside
    ``Event.wait``'s bookkeeping, or inside another handler's ``set``) waits for it forever:
    ``orml serve`` hung so when signals came twice."""

    def __init__(self) -> None:
        self._requested = False

    def set(self) -> None:
        self._requested = True

    def is_set(self) -> bool:
        return self._requested

    def wait(self, timeout_s: float) -> bool:
        """Whether a stop was requested within ``timeout_s`` (polled every 50 ms)."""
        deadline = time.monotonic() + timeout_s
        while not self._requested and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        return self._requested


def wait_ready(
    url: str,
    timeout_s: float = 120.0,
    stop: StopRequest | None = None,
    on_wait: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Poll ``url``/readyz until it answers 200 (models loaded, warm, healthy); its JSON.
    ``on_wait`` gets each 503's JSON (what the app still waits for). RuntimeError with the
    last answer after ``timeout_s``, or as soon as ``stop`` is set."""
    import httpx

    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        if stop is not None and stop.is_set():
            raise RuntimeError(f"{url}: stopped while waiting for it to be ready")
        try:
            r = httpx.get(f"{url.rstrip('/')}/readyz", timeout=10)
            if r.status_code == 200:
                return r.json()
            last = r.text
            if on_wait is not None and r.headers.get("content-type") == "application/json":
                on_wait(r.json())
        except httpx.HTTPError as exc:
            last = repr(exc)
            if on_wait is not None:
                on_wait({"reason": "the HTTP proxy does not answer yet"})
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {timeout_s} s: {last[:500]}")


#: How long ``stop`` lets Serve shut down gracefully (its ingress drains for
#: ``LOCAL_DRAIN_ENV``'s 2 s) before it takes the processes down anyway.
GRACEFUL_STOP_S = 10.0


def stop(graceful_s: float = GRACEFUL_STOP_S) -> bool:
    """Shut Serve and Ray down (what ``start`` started) within about ``graceful_s`` plus a
    few seconds, end an HAProxy that outlived them (Serve starts it in a process group of its
    own; a SIGTERM to Ray can leave it listening, answering 500 on the old port) and remove
    this start's files.

    When the whole process group got the signal (systemd, Kubernetes), Ray's processes are
    going down with it: some of this process's Ray children (the dashboard first) end within
    moments. Then neither Serve's graceful shutdown (its controller waits 30 s for replicas
    that are gone) nor Ray's (seconds of RPCs to a dying raylet, at exit too) is waited for:
    Ray starts its processes fate-shared with this one, so none outlives it."""
    import atexit

    import ray

    try:
        if cluster_going_down():
            log.info("Ray's own processes are stopping (a signal to the process group)")
            atexit.unregister(ray.shutdown)
        else:
            _shutdown_serve(graceful_s)
            ray.shutdown()
    finally:
        _remove_private_files()


def _ray_children() -> list[int]:
    """The Ray processes this process started that run now (GCS, dashboard, monitor, ...)."""
    return [
        pid
        for pid in processes.processes_mentioning(("/ray/",))
        if processes.parent_of(pid) == os.getpid() and processes.running(pid)
    ]


_started_ray_children: list[int] = []  # ``_ray_children`` once ``start`` had started Ray


def cluster_going_down(within_s: float = 0.5) -> bool:
    """Whether one of the Ray processes ``start`` started has ended, or ends within
    ``within_s``: the signal that stopped us went to the whole process group."""
    deadline = time.monotonic() + within_s
    while True:
        if any(not processes.running(pid) for pid in _started_ray_children):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def abandon() -> None:
    """For a cluster that is going down with the signal that stopped us (``cluster_going_down``):
    end what would outlive this process (its HAProxy, Ray processes below it), remove this
    start's files; the caller then ends the process with ``os._exit``."""
    _remove_private_files()


def _shutdown_serve(graceful_s: float) -> None:
    from ray.serve.context import _get_global_client

    try:
        client = _get_global_client(raise_if_no_controller_running=False)
        if client is not None:
            client.shutdown(timeout_s=graceful_s)
    except Exception as exc:  # a controller gone meanwhile: nothing to shut down gracefully
        log.info("Serve did not shut down gracefully: %s", exc)


_haproxy_dir: Path | None = None  # this process's HAProxy files (see ``haproxy_env``)
#: Serve's own HAProxy folders (``/tmp/haproxy-serve/<node id>``) before this start: a folder
#: Serve made for this start's node and left empty is removed at ``stop``.
_serve_dirs_before: set[Path] = set()


def _serve_haproxy_dirs() -> set[Path]:
    root = Path(tempfile.gettempdir()) / "haproxy-serve"
    return {p for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()


#: At stop, scans for our HAProxy processes (0.1 s apart) until HAPROXY_QUIET_SCANS in a row
#: find none, HAPROXY_SCANS at most.
HAPROXY_SCANS = 40
HAPROXY_QUIET_SCANS = 3


def _remove_private_files() -> None:
    """End what may outlive ``stop``: our HAProxy, and Ray processes left to us
    (``_adopt_orphans``); remove this start's files."""
    global _haproxy_dir
    # A dying Serve proxy actor can still (re)start HAProxy (a new process, ``-sf`` the old
    # ones) after a scan for it; seen in CI as a HAProxy outliving ``stop`` and answering on a
    # later start's reused port. So first nothing can start one (the wrapper exits, the config
    # is gone), then Ray ends, then scans run until several in a row find none.
    if _haproxy_dir is not None:
        _disarm_haproxy(_haproxy_dir)
    processes.end(_ray_descendants())
    if _haproxy_dir is not None:
        quiet = 0
        for _ in range(HAPROXY_SCANS):
            quiet = 0 if processes.kill_processes_mentioning(str(_haproxy_dir)) else quiet + 1
            if quiet >= HAPROXY_QUIET_SCANS:
                break
            time.sleep(0.1)
        shutil.rmtree(_haproxy_dir, ignore_errors=True)
        _haproxy_dir = None
        for left in _serve_haproxy_dirs() - _serve_dirs_before:
            with contextlib.suppress(OSError):
                left.rmdir()  # only if Serve left it empty


def _disarm_haproxy(workdir: Path) -> None:
    """From now on a start of HAProxy through ``workdir``'s wrapper does nothing: the wrapper
    is replaced (atomically: a shell already reading the old one keeps it) by one that exits,
    and the config a wrapper already running would hand HAProxy is removed (it fails to
    start)."""
    stopped = workdir / "haproxy.stopped"
    with contextlib.suppress(OSError):
        stopped.write_text("#!/bin/sh\nexit 0\n")
        stopped.chmod(0o755)
        os.replace(stopped, workdir / "haproxy")
    with contextlib.suppress(OSError):
        (workdir / "haproxy.cfg").unlink(missing_ok=True)


def _adopt_orphans() -> None:
    """Make this process the reaper of its descendants whose parents end first (Linux's
    PR_SET_CHILD_SUBREAPER): Ray's raylet starts agents that outlive it by tens of seconds
    (seen: a dashboard agent still holding the metrics port 15 s after ``ray.shutdown``);
    adopted here, ``stop`` ends them. Elsewhere, nothing."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _ray_descendants() -> list[int]:
    """Running Ray processes below this one in the process tree (the raylet's agents
    included, and any re-parented here)."""
    ray_pids = {
        pid for pid in processes.processes_mentioning(("ray::", "/ray/")) if processes.running(pid)
    }
    parent = {pid: processes.parent_of(pid) for pid in ray_pids}
    mine: set[int] = set()
    for pid in ray_pids:
        seen, up = [pid], parent.get(pid)
        while up is not None and up in ray_pids and up not in seen:
            seen.append(up)
            up = parent.get(up)
        if up == os.getpid():
            mine.update(seen)
    return sorted(mine)


def stop_if_started() -> bool:
    """``stop`` when this process started Ray (after a failed or interrupted start); the
    start's private files are removed either way. Returns as ``stop``."""
    import ray

    if ray.is_initialized():
        return stop()
    try:
        # A start cut short inside ray.init (SIGTERM there raises SystemExit) may have started
        # Ray's node already: ray.shutdown takes down whatever of it exists.
        ray.shutdown()
    finally:
        _remove_private_files()
    return True


def import_ray_keeping_signals() -> None:
    """Import Ray so that it leaves this process's SIGTERM alone: call it before anything
    imports ``ray`` in a process that starts a cluster and must stop on a signal.

    Ray's C++ core installs a failure-signal handler in the process that calls ray.init,
    and it takes SIGTERM too: printing a stack and aborting (``*** SIGTERM received``,
    ``Aborted``) instead of letting the launcher stop what it started. Ray reads
    ``RAY_DISABLE_FAILURE_SIGNAL_HANDLER`` once, when ``ray`` is imported: set here, before
    that import, and taken out of the environment again, it applies to this process only;
    the processes Ray starts keep their handler (their crash reports). `orml serve` once
    imported Ray first elsewhere, and a SIGTERM during ray.init aborted it (exit -6)."""
    if "ray" in sys.modules:
        return  # imported already (a test session): the handlers restored after ray.init do
    os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] = "1"
    try:
        import ray  # noqa: F401
    finally:
        del os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"]


@contextmanager
def local_serve(**kwargs: Any) -> Iterator[LocalServe]:
    """``start`` ... ``stop`` as a context manager (keyword arguments as ``start``)."""
    endpoints = start(**kwargs)
    try:
        yield endpoints
    finally:
        stop()
