"""A local Ray + Serve, the one way tests, benches and ``orml serve`` start the app.

``start`` brings up Ray (never on port 6379, which Redis uses) and Serve with HTTP and gRPC
ingress; ``run_app`` deploys ``serve_app.builder.build_app`` (what deploy.yaml runs) under a
name and route prefix; ``stop`` shuts both down. ``RedisProcess`` is a private redis-server on
a free port, ``free_port`` a free TCP port.

Serve's throughput mode (an HAProxy ingress, direct gRPC between replicas) is the default, as
in production. Its HAProxy has fixed stats/metrics ports and files under /tmp by default; each
local start gets its own free ports and directory, so two apps on one machine do not collide.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

THROUGHPUT_ENV = {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1", "RAY_SERVE_ENABLE_HA_PROXY": "1"}
"""Ray Serve's high-throughput mode (Ray >= 2.55): an HAProxy ingress and direct gRPC between
replicas; 2-4x less latency per hop here (docs/benchmarks.md)."""

LOCAL_DRAIN_ENV = {"RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S": "2"}
"""In throughput mode Serve holds a stopping ingress replica open for 30 s so that an external
load balancer can deregister it; a local start has only its own HAProxy in front, which learns
in ~0.1 s, so 2 s is plenty (and stopping takes seconds, not 35). Clusters behind a cloud load
balancer keep Ray's default."""

AUTOSCALING_ENV = {"RAY_SERVE_COLLECT_AUTOSCALING_METRICS_ON_HANDLE": "0"}
"""Replicas report their own load to the controller. Ray 2.60 starts a replica's push of custom
autoscaling stats (our Busy, ``actors.autoscaling``) only when replicas collect their own
ongoing-request metric; with the handles collecting it (Ray's default) a replica whose
autoscaling config arrives after it starts never pushes them, and the Busy policy sees none."""

#: Ports per protocol for one local cluster's ingress replicas (see ``cluster_port_block``).
DIRECT_INGRESS_BLOCK = 50
#: A local cluster's own ports: its ingress replicas' (HTTP, then gRPC), then HAProxy's stats
#: and metrics ports.
CLUSTER_BLOCK = 2 * DIRECT_INGRESS_BLOCK + 2
#: Where those blocks are taken from: below Linux's ephemeral ports (32768+, which outgoing
#: connections take at any moment: a port found free there can be gone when HAProxy binds it)
#: and Serve's own ranges (30000-31000 HTTP, 40000-41000 gRPC).
CLUSTER_PORT_RANGE = (20000, 30000)

PROCESS_ENV = {"MALLOC_ARENA_MAX": "2"}
"""Set for Ray's processes (as defaults: the caller's environment wins). glibc gives each
thread that allocates its own malloc arena, up to 8 per core; with Ray's and Serve's threads
the ingress's RSS grew ~1 MB/min at 20 requests/s while its Python heap stayed flat, and two
arenas hold every process flat (``bench/soak.py``, docs/benchmarks.md). Read at process start:
on a cluster set it in the nodes' environment (``ray start``, the container image)."""

GRPC_SERVICERS = ["serve_app.grpc_api.registration.add_orml_servicer"]
"""What Serve's gRPC ingress serves (``grpc_options.grpc_servicer_functions`` in deploy.yaml)."""


def cluster_port_block(rng: random.Random | None = None) -> int:
    """The first of ``CLUSTER_BLOCK`` ports of this local cluster's own, all free now.

    Serve gives each ingress replica an HTTP and a gRPC port from fixed ranges (30000-31000,
    40000-41000), lowest first, per cluster, and binds the gRPC one with SO_REUSEPORT: with
    three local clusters running, `ss` showed three ingress replicas listening on 40000, and
    every gRPC request to one cluster could be answered by another's (seen: a test app
    answering every 5th request, its gRPC ones, with the other cluster's model version). Each
    cluster started here takes a block chosen at random among those of
    ``CLUSTER_PORT_RANGE`` with no port bound now (``direct_ingress_env`` and HAProxy's ports
    come from it). RuntimeError when there is none.
    """
    rng = rng or random.Random()
    low, high = CLUSTER_PORT_RANGE
    bases = list(range(low, high - CLUSTER_BLOCK + 1, CLUSTER_BLOCK))
    rng.shuffle(bases)
    for base in bases:
        if all(_bindable(port) for port in range(base, base + CLUSTER_BLOCK)):
            return base
    raise RuntimeError(f"no block of {CLUSTER_BLOCK} free ports in {low}-{high}")


def direct_ingress_env(base: int) -> dict[str, str]:
    """Serve's ingress-replica port ranges, from the block at ``base`` (cluster_port_block)."""
    grpc = base + DIRECT_INGRESS_BLOCK
    return {
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(base),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(grpc - 1),
        "RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT": str(grpc),
        "RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT": str(grpc + DIRECT_INGRESS_BLOCK - 1),
    }


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports free now: all held open until all are chosen, so the kernel
    cannot hand the same one out twice (it may, to binds that close in between)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def apply_process_env() -> None:
    """Put ``PROCESS_ENV`` into this process's environment, for the Ray it starts to inherit."""
    for key, value in PROCESS_ENV.items():
        os.environ.setdefault(key, value)


#: Rewrites Serve's generated HAProxy config so that its stats page and metrics exporter listen on
#: loopback only (Ray's template binds them to every interface, ports alone configurable), then
#: runs the real binary with the same arguments (``haproxy -db -f CFG [-sf PIDS] [-x SOCK]``).
_HAPROXY_WRAPPER = """#!/bin/sh
cfg=""; prev=""
for a in "$@"; do [ "$prev" = "-f" ] && cfg="$a"; prev="$a"; done
if [ -n "$cfg" ] && [ -f "$cfg" ]; then
  awk '/^(global|defaults|frontend|backend|listen)/ {{ section = $0 }}
       (section ~ /^listen stats/ || section ~ /^frontend prometheus/) && $1 == "bind" {{
         sub(/bind[ \t]+[*]?:/, "bind 127.0.0.1:") }}
       {{ print }}' "$cfg" > "$cfg.loopback" && mv "$cfg.loopback" "$cfg"
fi
exec {real} "$@"
"""


def haproxy_env(
    workdir: Path, stats_port: int, metrics_port: int, loopback_stats: bool = True
) -> dict[str, str]:
    """Ports and private files for this start's HAProxy (see module doc); with
    ``loopback_stats`` its stats page and metrics listen on 127.0.0.1 only."""
    env = {}
    if loopback_stats:
        from ray.serve._private.haproxy import get_haproxy_binary

        wrapper = workdir / "haproxy"
        wrapper.write_text(_HAPROXY_WRAPPER.format(real=get_haproxy_binary()))
        wrapper.chmod(0o755)
        env["RAY_SERVE_HAPROXY_BINARY_PATH"] = str(wrapper)
    return env | {
        "RAY_SERVE_HAPROXY_STATS_PORT": str(stats_port),
        "RAY_SERVE_HAPROXY_METRICS_PORT": str(metrics_port),
        "RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": str(workdir / "haproxy.cfg"),
        "RAY_SERVE_HAPROXY_SOCKET_PATH": str(workdir / "admin.sock"),
        "RAY_SERVE_HAPROXY_SERVER_STATE_BASE": str(workdir),
        "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": str(workdir / "server-state"),
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
    not started), the Prometheus metrics export."""

    http: str
    grpc: str
    dashboard: str | None
    metrics: str


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
    loopback_stats: bool = True,
    namespace: str = "serve",
    extra_env: Mapping[str, str] | None = None,
) -> LocalServe:
    """Start a local Ray and Serve (HTTP + gRPC ingress); ports default to free ones.

    dashboard_port : None starts no dashboard. grpc_servicers : what the gRPC ingress serves
    (default ``GRPC_SERVICERS``). loopback_stats : HAProxy's stats page and metrics exporter
    on 127.0.0.1 only (False: every interface, Ray's default). extra_env : more environment
    for Ray's processes.
    """
    global _haproxy_dir
    import ray
    from ray import serve
    from ray.serve.config import gRPCOptions

    apply_process_env()
    ports = iter(free_ports(3))  # distinct, whichever of them are used
    http_port = http_port or next(ports)
    grpc_port = grpc_port or next(ports)
    metrics_port = metrics_port or next(ports)
    env: dict[str, str] = {**AUTOSCALING_ENV, **(extra_env or {})}
    if throughput_mode:
        env.update(THROUGHPUT_ENV)
        env.update(LOCAL_DRAIN_ENV)
        base = cluster_port_block()
        env.update(direct_ingress_env(base))
        _haproxy_dir = Path(tempfile.mkdtemp(prefix="orml-haproxy-"))
        haproxy_ports = base + 2 * DIRECT_INGRESS_BLOCK, base + 2 * DIRECT_INGRESS_BLOCK + 1
        env.update(haproxy_env(_haproxy_dir, *haproxy_ports, loopback_stats))
    # Ray's processes inherit the environment of the raylet that ray.init starts; this process
    # keeps its own, so that processes it starts later (a second cluster, `ray start`) do not.
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
        serve.start(
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
    )


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


def wait_ready(url: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """Poll ``url``/readyz until it answers 200 (models loaded, warm, healthy); its JSON.
    RuntimeError with the last answer after ``timeout_s``."""
    import httpx

    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{url.rstrip('/')}/readyz", timeout=10)
            if r.status_code == 200:
                return r.json()
            last = r.text
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {timeout_s} s: {last[:500]}")


def stop() -> None:
    """Shut Serve and Ray down (what ``start`` started), and end an HAProxy that outlived
    them (Serve starts it in a process group of its own; a SIGTERM to Ray can leave it
    listening, answering 500 on the old port)."""
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()
        if _haproxy_dir is not None:
            _kill_processes_mentioning(str(_haproxy_dir))


_haproxy_dir: Path | None = None  # this process's HAProxy files (see ``haproxy_env``)


def stop_if_started() -> None:
    """``stop`` when this process started Ray (after a failed start), else nothing."""
    import ray

    if ray.is_initialized():
        stop()


def _kill_processes_mentioning(needle: str, grace_s: float = 2.0) -> list[int]:
    """SIGTERM (then SIGKILL after ``grace_s``) every process whose command line contains
    ``needle``; their pids."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if needle in cmdline:
            pids.append(int(proc.name))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if Path(f"/proc/{p}").exists()]
        time.sleep(0.05)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def check_ports_free(ports: Mapping[str, int], host: str = "0.0.0.0") -> None:
    """RuntimeError naming every port something already listens on (a stale server?)."""
    taken = []
    for what, port in ports.items():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                taken.append(f"{what} port {port}")
    if taken:
        raise RuntimeError(
            f"{', '.join(taken)} already in use: another orml serve or a stale listener "
            f"(see `ss -ltnp`); stop it or choose other ports"
        )


@contextmanager
def local_serve(**kwargs: Any) -> Iterator[LocalServe]:
    """``start`` ... ``stop`` as a context manager (keyword arguments as ``start``)."""
    endpoints = start(**kwargs)
    try:
        yield endpoints
    finally:
        stop()


class RedisProcess:
    """A private ``redis-server`` on a free loopback port, nothing kept on disk."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @staticmethod
    def available() -> bool:
        return shutil.which("redis-server") is not None

    def start(self) -> RedisProcess:
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("private redis-server did not start")

    def kill(self) -> None:
        if self.proc is not None:
            self.resume()
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
