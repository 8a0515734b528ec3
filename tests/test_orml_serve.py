"""``orml serve`` as an operator runs it: it starts, answers, and stops on SIGTERM (what
systemd, Docker and Kubernetes send) leaving no listener behind; a port already taken is named
at start instead of failing later."""

from __future__ import annotations

import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from ops.ports import free_port, free_ports

ORML = str(Path(sys.executable).with_name("orml"))
pytestmark = pytest.mark.serve


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def haproxy_pids() -> set[int]:
    """Running HAProxy processes: a zombie (exited, its new parent not yet reaping it, as
    orphans wait for this machine's init) holds no port and runs nothing."""
    out = subprocess.run(["pgrep", "-x", "haproxy"], capture_output=True, text=True).stdout
    return {int(p) for p in out.split() if not _zombie(int(p))}


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True  # gone


def haproxy_listeners(exclude: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket listening in a haproxy process not in ``exclude``,
    read from /proc (no ss needed)."""
    inodes = set()
    for pid in haproxy_pids() - exclude:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.iterdir() if fd_dir.exists() else ():
            target = os.readlink(fd) if fd.is_symlink() else ""
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                host, port = fields[1].split(":")
                wildcard = set(host) == {"0"}
                found.add(("*" if wildcard else host, int(port, 16)))
    return found


def test_sigterm_stops_everything_and_frees_every_port(tmp_path):
    """One `orml serve --host 127.0.0.1` from start to SIGTERM: its start talks, what the
    app binds follows ``host``, HAProxy sheds a burst itself, and SIGTERM to the process alone
    (once it serves) exits 0 and frees every port."""
    names = ("port", "grpc-port", "dashboard-port", "metrics-port")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    before = haproxy_pids()
    log = (tmp_path / "serve.log").open("w")
    args = [ORML, "serve", "--host", "127.0.0.1", *(f"--{k}={v}" for k, v in ports.items())]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while "SIGTERM stops" not in (tmp_path / "serve.log").read_text():
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "orml serve did not come up"
            time.sleep(1)
        out = (tmp_path / "serve.log").read_text()
        assert "/v1/routes/solve" in out and "gRPC" in out
        # The start talks: a line of progress at least every 5 s until ready, none of Ray's
        # token warning or address rewrite.
        times = [float(t) for t in re.findall(r"^\[\s*([\d.]+) s\]", out, re.M)]
        assert times and out.count("] ready") == 1, out[-3000:]
        assert max(b - a for a, b in itertools.pairwise([0.0, *times])) <= 5.0, times
        assert "Token authentication is enabled" not in out
        assert "Overwriting previous Ray address" not in out
        # Ready was waited for before the banner; on a loaded host a replica's readiness answer
        # can still take longer than readiness_timeout_s for a moment (503), so poll briefly.
        ready, until = 0, time.monotonic() + 60
        while ready != 200 and time.monotonic() < until:
            ready = httpx.get(f"http://127.0.0.1:{ports['port']}/readyz", timeout=30).status_code
            time.sleep(0 if ready == 200 else 1)
        assert ready == 200
        assert_binds_follow_host(proc, before, ports)
        answers = burst_of_rounds(f"http://127.0.0.1:{ports['port']}", 60)
        proxy_shed = [r for r in answers if r.status_code == 503 and "at the proxy" in r.text]
        assert {r.status_code for r in answers} <= {200, 503}
        assert proxy_shed and all(r.headers.get("retry-after") == "1" for r in proxy_shed)
        # The proxy read each shed body whole first, so its 503 leaves the connection open.
        assert all(r.headers.get("x-shed") == "proxy" for r in proxy_shed)
        assert not [r for r in proxy_shed if r.headers.get("connection") == "close"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert "stopped" in (tmp_path / "serve.log").read_text()
    time.sleep(1)
    assert [p for p in ports.values() if listening(p)] == []
    assert haproxy_pids() <= before  # no HAProxy of ours left running


def burst_of_rounds(url: str, n: int) -> list[httpx.Response]:
    """``n`` dispatch rounds at once: past the dispatch lane's capacity (deploy.yaml: 4 running
    + 8 queued) HAProxy answers 503 + Retry-After itself (``ops.haproxy_config``). Each round
    is another (seed): the same body again is a cached answer in microseconds, and the burst
    then only overflowed the lane when every request reached HAProxy before the first solve
    ended (on a loaded host they did not, and nothing was shed)."""
    import asyncio

    from planner import generate_round
    from serve_app.schemas import DispatchRequest

    bodies = [
        DispatchRequest.from_domain(generate_round(100, 20, seed=k)).model_dump_json()
        for k in range(n)
    ]

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=60) as c:
            return await asyncio.gather(
                *(
                    c.post(
                        f"{url}/v1/dispatch",
                        content=body,
                        headers={"content-type": "application/json"},
                    )
                    for body in bodies
                )
            )

    return asyncio.run(go())


def orml_tmp_dirs(serve_folders: bool = True) -> set[str]:
    """Our folders in /tmp, and the ones Serve makes for its HAProxy per node (which a stop
    removes; a signal to the whole group ends Ray's processes with us, before it can)."""
    tmp = Path(tempfile.gettempdir())
    serve = tmp.glob("haproxy-serve/*") if serve_folders else ()
    return {str(p) for p in (*tmp.glob("orml-*"), *serve)}


@pytest.mark.parametrize(
    "moment",
    ["0.5s", "4s", "ready-group"],
    ids=["while-ray-starts", "while-serve-deploys", "group-at-ready"],
)
def test_a_signal_at_any_moment_stops_everything_within_seconds(tmp_path, moment):
    """SIGTERM early in start-up, while Serve deploys, and at the first instant /readyz answers
    200 to the whole process group (what systemd and Kubernetes send) followed by many signals
    in a row (a forwarding parent); SIGTERM to the process alone once it serves is
    ``test_sigterm_stops_everything_and_frees_every_port``:
    each time `orml serve` exits 0 within seconds, and leaves no HAProxy, no listener and no
    file of its own in /tmp behind."""
    names = ("port", "grpc-port", "dashboard-port", "metrics-port")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    haproxy_before, tmp_before = haproxy_pids(), orml_tmp_dirs()
    log = tmp_path / "serve.log"
    args = [ORML, "serve", *(f"--{k}={v}" for k, v in ports.items())]
    with log.open("w") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        if moment.endswith("s"):
            # Seconds after `orml serve` says it is starting (its handlers are in place then;
            # on a slow machine the interpreter alone may take half a second to get there).
            deadline = time.monotonic() + 60
            while "starting" not in log.read_text():
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.01)
            time.sleep(float(moment[:-1]))
        else:
            deadline = time.monotonic() + 240
            while not _ready(ports["port"]):
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.02)
        t0 = time.monotonic()
        if moment == "ready-group":
            os.killpg(proc.pid, signal.SIGTERM)
            # A forwarding parent after the group signal: the handler runs inside itself. With
            # a threading.Event set there, `orml serve` hung (py-spy: Event.set inside
            # Event.set).
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGINT, signal.SIGTERM) * 3:
                proc.send_signal(sig)
                time.sleep(0.001)
        else:
            proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    print(f"{moment}: exit {code} after {took:.2f} s")
    assert code == 0, log.read_text()[-3000:]
    assert took < 15, log.read_text()[-3000:]
    assert "stopped" in log.read_text()
    time.sleep(1)
    assert haproxy_pids() <= haproxy_before
    assert [p for p in ports.values() if listening(p)] == []
    assert orml_tmp_dirs(serve_folders=moment != "ready-group") <= tmp_before


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_port_already_in_use_is_named_at_start():
    with socket.socket() as squatter:
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        run = subprocess.run(
            [ORML, "serve", f"--port={port}", f"--grpc-port={free_port()}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert run.returncode == 2
    assert f"HTTP port {port} already in use" in run.stderr


def test_each_local_cluster_takes_its_own_ingress_ports_away_from_bound_ones():
    """Serve binds ingress replicas' ports with SO_REUSEPORT from one fixed range, so two local
    clusters would share them (and each other's requests); each takes a block of its own, and
    a block with a port already bound (here with SO_REUSEPORT, as a replica binds) is skipped."""
    import random

    from ops.ports import DIRECT_INGRESS_BLOCK, cluster_port_block, direct_ingress_env

    low = cluster_port_block(random.Random(7))
    env = direct_ingress_env(low)
    assert int(env["RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT"]) == low
    assert int(env["RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT"]) == low + DIRECT_INGRESS_BLOCK - 1
    assert int(env["RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT"]) == low + DIRECT_INGRESS_BLOCK
    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        held.bind(("0.0.0.0", low + 3))
        held.listen()
        assert cluster_port_block(random.Random(7)) != low  # the same draw, that block taken


def _speaks_http1(port: int) -> bool:
    """Whether the listener on ``port`` answers an HTTP/1.0 request as HTTP/1 (a gRPC server,
    HTTP/2 only, does not)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET /-/healthz HTTP/1.0\r\n\r\n")
            return s.recv(16).startswith(b"HTTP/1.")
    except OSError:
        return False


def assert_binds_follow_host(proc: subprocess.Popen, before: set[int], ports: dict) -> None:
    """``orml serve --host 127.0.0.1``: the proxy's frontends, its stats and metrics, the
    Ingress replicas' own listeners and Serve's fallback proxy listen on 127.0.0.1 only;
    what listens on every interface is Ray's (its GCS, raylet, agents, workers' gRPC, Serve's
    gRPC servers, docs/deploy.md), none of it the app's HTTP. (HAProxy's stats and metrics
    stay on loopback whatever the host: tests/serve/test_haproxy_config.py.)"""
    import psutil

    ours = {proc.pid} | {c.pid for c in psutil.Process(proc.pid).children(recursive=True)}
    ours |= haproxy_pids() - before  # HAProxy runs in a session of its own
    listeners = [
        (c.laddr.ip, c.laddr.port, psutil.Process(c.pid).name())
        for c in psutil.net_connections("inet")
        if c.status == psutil.CONN_LISTEN and c.pid in ours
    ]
    proxy = haproxy_listeners(before)
    assert proxy and {host for host, _ in proxy} == {"0100007F"}, proxy  # /proc: 127.0.0.1
    by_port = {port: ip for ip, port, _ in listeners}
    assert by_port[ports["port"]] == by_port[ports["grpc-port"]] == "127.0.0.1"
    # Serve's replicas and proxy: their HTTP listeners (the lanes', the fallback proxy's)
    # on the host; on every interface only gRPC (Ray's)
    serve = [(ip, port) for ip, port, name in listeners if "Serve" in name or "Proxy" in name]
    http_on_host = [port for ip, port in serve if ip == "127.0.0.1" and _speaks_http1(port)]
    assert http_on_host, serve
    wildcard_http = [port for ip, port in serve if ip in ("0.0.0.0", "::") and _speaks_http1(port)]
    assert wildcard_http == [], wildcard_http
