"""``ops.haproxy_config``: Serve's generated HAProxy config, rewritten as ``orml serve`` runs
it, is valid for the real HAProxy binary and sheds each lane's excess at the proxy."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ops.haproxy_config import (
    BUFFER_BYTES,
    LANES_ENV,
    QUEUE_MS,
    QUEUE_MS_ENV,
    REAL_BINARY_ENV,
    SERVE_DEFAULTS_ENV,
    proxy_threads,
    rewrite,
)
from serve_app.config import AdmissionArgs
from serve_app.http.routes import lane_capacities

SERVE_CONFIG = Path(__file__).parent / "data" / "serve_haproxy.cfg"


@pytest.fixture
def config(tmp_path: Path) -> str:
    (tmp_path / "500.http").write_text("HTTP/1.1 500 Internal Server Error\r\n\r\n")
    return SERVE_CONFIG.read_text().replace("{workdir}", str(tmp_path))


def test_stats_and_metrics_listen_on_loopback_only(config):
    out = rewrite(config, {})
    binds = [line.split()[1] for line in out.splitlines() if line.strip().startswith("bind")]
    assert binds and all(b.startswith("127.0.0.1:") for b in binds), binds


def test_each_lane_gets_a_backend_capped_at_its_capacity_before_the_apps_rule(config):
    lanes = lane_capacities(AdmissionArgs())
    out = rewrite(config, lanes)
    rules = [line.strip() for line in out.splitlines() if line.strip().startswith("use_backend")]
    app_rule = rules.index("use_backend http-orml if is_http-orml")
    lane_rules = [r for r in rules if "-lane" in r]
    assert len(lane_rules) == len(lanes) and all(rules.index(r) < app_rule for r in lane_rules)
    assert "use_backend http-orml-lane0 if is_http-orml { path,url_dec /v1/dispatch }" in rules
    for k, (_, capacity) in enumerate(sorted(lanes.items())):
        section = out.split(f"backend http-orml-lane{k}\n")[1].split("\nbackend ")[0]
        servers = [s for s in section.splitlines() if s.strip().startswith("server ")]
        primary = [s for s in servers if "backup" not in s]
        assert primary and all(s.endswith(f"maxconn {capacity}") for s in primary)
        assert f"timeout queue {QUEUE_MS}ms" in section and "Retry-After 1" in section


def test_lanes_read_bodies_whole_and_do_not_log_their_own_sheds(config):
    lanes = lane_capacities(AdmissionArgs())
    out = rewrite(config, lanes)
    assert f"    tune.bufsize {BUFFER_BYTES}\n" in out
    for k, (_, capacity) in enumerate(sorted(lanes.items())):
        section = out.split(f"backend http-orml-lane{k}\n")[1].split("\nbackend ")[0]
        shedding = capacity is not None
        assert ("http-request wait-for-body time 10s" in section) == shedding
        assert ("{ req.hdr(expect) -m str -i 100-continue } { queue() gt 0 }" in section) == (
            shedding
        )
        assert ("set-log-level silent if { res.hdr(x-shed) -m found }" in section) == shedding
        assert ("hdr X-Shed proxy" in section) == shedding
    # Only the shedding lanes: Serve's own backends log and stream as Serve configured them.
    shedding_lanes = sum(capacity is not None for capacity in lanes.values())
    assert out.count("wait-for-body") == shedding_lanes
    assert out.count("res.hdr(x-shed)") == shedding_lanes
    # As Serve configured it, for comparison (bench/overload.py --proxy-serve-defaults).
    before = rewrite(config, lanes, cheap_sheds=False)
    assert "    tune.bufsize 16384\n" in before
    assert "wait-for-body" not in before and "100-continue" not in before
    assert "set-log-level silent if { res" not in before


def test_proxy_threads_leave_the_replicas_their_cores():
    assert [proxy_threads(n) for n in (1, 2, 3, 8, 64)] == [1, 1, 1, 4, 32]


def test_the_rewritten_config_is_valid_for_the_real_haproxy(config, tmp_path):
    from ray.serve._private.haproxy import get_haproxy_binary

    path = tmp_path / "haproxy.cfg"
    path.write_text(rewrite(config, lane_capacities(AdmissionArgs())))
    check = subprocess.run(
        [get_haproxy_binary(), "-c", "-f", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_lane_servers_point_at_the_replicas_own_listeners_where_registered(config, tmp_path):
    from ray.serve._private.haproxy import get_haproxy_binary

    from serve_app.http.lean_listener import registered_ports

    ports = tmp_path / "lean"
    ports.mkdir()
    (ports / "02inp9y5").write_text("24001\n")
    (ports / "gone1234").write_text("24002\n")  # a replica no longer in the config
    (ports / "broken").write_text("not a port")
    assert registered_ports(ports) == {"02inp9y5": 24001, "gone1234": 24002}
    out = rewrite(config, lane_capacities(AdmissionArgs()), lean_ports=registered_ports(ports))
    lanes = out.split("\nbackend http-orml-lane")[1:]
    assert lanes
    for section in lanes:
        server = next(s.split() for s in section.splitlines() if "SERVE_REPLICA_" in s)
        assert server[2] == "127.0.0.1:24001"
        assert server[3:6] == ["no-check", "track", "http-orml/SERVE_REPLICA_orml-Ingress-02inp9y5"]
    # Serve's own backend, and gRPC's, are untouched.
    app = out.split("backend http-orml\n")[1].split("\nbackend ")[0]
    assert "127.0.0.1:23264 check" in app
    assert "24001" not in out.split("\nbackend http-orml-lane")[0]
    path = tmp_path / "haproxy.cfg"
    path.write_text(out)
    check = subprocess.run(
        [get_haproxy_binary(), "-c", "-f", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("queue_ms", [None, 7])
def test_the_wrapper_sets_the_lanes_queue_time(config, tmp_path, queue_ms):
    """The wrapper Serve runs as its HAProxy rewrites the config file in place, with the lanes'
    queue time from ``QUEUE_MS_ENV`` where set, then runs the real binary."""
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(config)
    env = {
        **os.environ,
        LANES_ENV: json.dumps({"/v1/dispatch": 12}),
        REAL_BINARY_ENV: "/bin/true",
        SERVE_DEFAULTS_ENV: "0",
    }
    env.pop(QUEUE_MS_ENV, None)
    if queue_ms is not None:
        env[QUEUE_MS_ENV] = str(queue_ms)
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-m", "ops.haproxy_config", "-f", str(cfg)],
        env=env,
        cwd=root,
        check=True,
        timeout=60,
    )
    section = cfg.read_text().split("backend http-orml-lane0\n")[1].split("\nbackend ")[0]
    assert f"timeout queue {queue_ms or QUEUE_MS}ms" in section


class SlowReplica(BaseHTTPRequestHandler):
    """An ingress replica that takes 1.5 s a request and answers with the body's length."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # HAProxy's health checks
        self._answer(b"success")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        time.sleep(1.5)
        self._answer(str(len(body)).encode())

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _on_free_ports(config: str, replica_port: int) -> tuple[str, int]:
    """``config`` with its one replica at ``replica_port`` and its binds on free ports;
    (the config, the HTTP frontend's port)."""
    from ops.ports import free_ports

    front, *others = free_ports(4)
    for old, new in (
        ("127.0.0.1:23264", f"127.0.0.1:{replica_port}"),
        ("127.0.0.1:48951", f"127.0.0.1:{front}"),
        *zip(
            ("*:23365", "127.0.0.1:48921", "*:23364"),
            [f"127.0.0.1:{p}" for p in others],
            strict=True,
        ),
    ):
        assert old in config
        config = config.replace(old, new)
    return config, front


@contextlib.contextmanager
def _proxy(config: str, tmp_path: Path, front: int) -> Iterator[None]:
    """The real HAProxy on ``config``, taking connections on ``front``."""
    from ray.serve._private.haproxy import get_haproxy_binary

    path = tmp_path / "haproxy.cfg"
    path.write_text(config)
    proxy = subprocess.Popen([get_haproxy_binary(), "-f", str(path)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", front)):
                break
            time.sleep(0.05)
        yield
    finally:
        proxy.terminate()
        proxy.wait(timeout=10)


def _post(port: int, body: bytes, expect: bool) -> tuple[list[bytes], float]:
    """POST ``body`` to the proxy; (the status lines answered, in order; seconds to the
    first). With ``expect`` the body follows only a 100 Continue."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        head = f"POST /v1/dispatch HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n"
        s.sendall((head + ("Expect: 100-continue\r\n" if expect else "") + "\r\n").encode())
        t0 = time.monotonic()
        if not expect:
            s.sendall(body)
        stream, statuses, first = s.makefile("rb"), [], None
        while True:
            lines = []
            while (line := stream.readline()) not in (b"\r\n", b""):
                lines.append(line)
            if not lines:
                return statuses, first
            first = first if first is not None else time.monotonic() - t0
            statuses.append(lines[0].strip())
            headers = dict(x.decode().lower().strip().split(": ", 1) for x in lines[1:])
            if b" 100 " in lines[0]:
                s.sendall(body)
                continue
            stream.read(int(headers.get("content-length", 0)))
            statuses.append(
                headers.get("x-shed", "").encode() + b"|" + headers.get("connection", "").encode()
            )
            return statuses, first


def test_a_client_that_asks_first_is_refused_before_its_body(config, tmp_path):
    """The rewritten config on the real HAProxy, a lane of one in front of a slow replica: a
    client sending ``Expect: 100-continue`` while another request waits in the lane's queue
    is answered 503 at once, no 100 Continue, its body never sent; with the lane free it gets
    100 Continue and its answer; one without the header waits in the queue as before."""
    replica = ThreadingHTTPServer(("127.0.0.1", 0), SlowReplica)
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    config, front = _on_free_ports(config, replica.server_address[1])
    with _proxy(rewrite(config, {"/v1/dispatch": 1}, queue_ms=3000), tmp_path, front):
        body = b"x" * 150_000
        with ThreadPoolExecutor(2) as pool:
            running = pool.submit(_post, front, body, False)
            time.sleep(0.3)
            queued = pool.submit(_post, front, body, False)
            time.sleep(0.3)
            refused, seconds = _post(front, body, True)
            assert refused == [b"HTTP/1.1 503 Service Unavailable", b"proxy|close"]
            assert seconds < 0.5
            for waited in (running, queued):
                assert waited.result()[0][0] == b"HTTP/1.1 200 OK"
        statuses, _ = _post(front, body, True)
        assert statuses[0] == b"HTTP/1.1 100 Continue" and statuses[1] == b"HTTP/1.1 200 OK"
    replica.shutdown()


class ClosesReusedConnections(BaseHTTPRequestHandler):
    """A replica that answers the first request on a connection and closes the connection,
    unanswered, when a second one arrives on it: what a server does whose keep-alive runs
    out, or whose process stops, just as the proxy sends a request on an idle connection."""

    protocol_version = "HTTP/1.1"
    served = 0

    def do_GET(self) -> None:  # HAProxy's health checks
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        if self.served:
            self.close_connection = True
            return
        self._answer()

    def _answer(self) -> None:
        self.served += 1
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("path", ["/v1/dispatch", "/v1/routes/solve"])
def test_a_request_sent_on_a_server_connection_closing_under_it_is_sent_again(
    config, tmp_path, path
):
    """Two clients, each on a new connection, one after the other: the proxy sends the
    second request over the server connection the first one left idle, and the server closes
    it unanswered. With Serve's config as written the second client's connection is closed
    without an answer (``RemoteDisconnected`` in Python); rewritten, HAProxy sends the
    request again on a new connection and the client gets its answer, on a lane
    (/v1/dispatch) and on Serve's own backend (/v1/routes/solve, no lane here)."""
    replica = ThreadingHTTPServer(("127.0.0.1", 0), ClosesReusedConnections)
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    served, front = _on_free_ports(config, replica.server_address[1])
    # One proxy thread: each thread keeps idle server connections of its own, and a second
    # request taken by another thread may open a new one (nothing is reused, nothing shown).
    assert "    nbthread 4\n" in served
    served = served.replace("    nbthread 4\n", "    nbthread 1\n")

    def second_of_two() -> bytes:
        answers = []
        for _ in range(2):
            with socket.create_connection(("127.0.0.1", front), timeout=10) as s:
                s.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode()
                )
                answers.append(s.recv(4096).split(b"\r\n", 1)[0])
                # Connected until the proxy has put the server connection back in its pool
                # (a client leaving at once can race the proxy into closing it instead).
                time.sleep(0.3)
        assert answers[0] == b"HTTP/1.1 200 OK"
        return answers[1]

    try:
        with _proxy(served, tmp_path, front):
            assert second_of_two() == b""  # closed, no answer: the cause
        with _proxy(rewrite(served, {"/v1/dispatch": 12}), tmp_path, front):
            assert second_of_two() == b"HTTP/1.1 200 OK"
    finally:
        replica.shutdown()


def test_a_connection_budget_bounds_what_a_client_holds(config, tmp_path):
    """Headers and body within REQUEST_S, idle keep-alive and client silence cut from Serve's
    hour, at most CONNECTIONS_PER_SOURCE connections per source on both frontends; and the
    real HAProxy takes the result."""
    from ray.serve._private.haproxy import get_haproxy_binary

    from ops.haproxy_config import CONNECTIONS_PER_SOURCE, REQUEST_S

    out = rewrite(config, {"/v1/dispatch": 12})
    assert f"timeout http-request {REQUEST_S}s" in out
    assert "timeout client 3600s" not in out and "timeout http-keep-alive 90s" not in out
    reject = f"reject if {{ sc_conn_cur(0) gt {CONNECTIONS_PER_SOURCE} }}"
    assert out.count(reject) == 2
    # the lanes wait for a body no longer than a request may take
    assert f"wait-for-body time {REQUEST_S}s" in out
    path = tmp_path / "haproxy.cfg"
    path.write_text(out)
    got = subprocess.run(
        [get_haproxy_binary(), "-c", "-f", str(path)], capture_output=True, text=True
    )
    assert got.returncode == 0, got.stdout + got.stderr


def test_lanes_match_the_decoded_path_and_bad_request_ids_are_dropped_first(config):
    out = rewrite(config, {"/v1/dispatch": 12})
    assert "{ path,url_dec /v1/dispatch }" in out
    front = out.split("frontend http_frontend\n")[1].split("\nfrontend ")[0]
    drop = front.index("del-header x-request-id if { req.hdr(x-request-id),length gt 128 }")
    assert drop < front.index("use_backend")


def test_the_proxys_budget_is_its_file_limit_and_shares_tighten_as_it_fills():
    from ops.haproxy_config import (
        CONNECTIONS_PER_SOURCE,
        SHARE_WHEN_FILLING,
        SHARE_WHEN_NEARLY_FULL,
        _connection_budget,
        front_connections,
    )

    assert front_connections(20_000) == int((20_000 - 1024) / 2.5)  # sockets and pipes
    assert front_connections(1024) == 256 and front_connections(10**9) == 200_000
    serve = (
        "global\n    maxconn 4096\ndefaults\n    mode http\nfrontend http_frontend\n    bind *:1\n"
    )
    got = _connection_budget(serve, maxconn=10_000)
    assert "maxconn 10000" in got and "maxconn 4096" not in got
    assert f"reject if {{ sc_conn_cur(0) gt {CONNECTIONS_PER_SOURCE} }}" in got
    assert f"reject if {{ fe_conn gt 5000 }} {{ sc_conn_cur(0) gt {SHARE_WHEN_FILLING} }}" in got
    assert "set-header Connection close if { fe_conn gt 5000 }" in got
    assert (
        f"reject if {{ fe_conn gt 8000 }} {{ sc_conn_cur(0) gt {SHARE_WHEN_NEARLY_FULL} }}" in got
    )


class QuickReplica(SlowReplica):
    """An ingress replica that answers at once."""

    def do_POST(self) -> None:
        self._answer(self.rfile.read(int(self.headers["content-length"])))


def _kept_open(port: int, source: str = "127.0.0.1") -> tuple[bytes, bool]:
    """One request on a new connection from ``source``; (its status line, whether the proxy
    kept the connection open after the answer)."""
    with socket.socket() as s:
        s.bind((source, 0))
        s.settimeout(5)
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/routes/solve HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        answer = b""
        while not answer.endswith(b"\r\n\r\n{}"):
            answer += s.recv(4096)
        s.settimeout(0.5)
        try:
            return answer.split(b"\r\n", 1)[0], s.recv(1) != b""
        except TimeoutError:
            return answer.split(b"\r\n", 1)[0], True


def test_past_half_its_budget_the_proxy_keeps_no_connection_idle(config, tmp_path):
    """The real HAProxy on a budget of 16 connections: an answer keeps its connection open
    for the next request; with 9 idle connections from another host (past FILLING) the same
    answer closes it, so no caller holds a connection between requests while the proxy fills
    (Envoy's overload manager does the same: ``disable_http_keepalive``)."""
    replica = ThreadingHTTPServer(("127.0.0.1", 0), QuickReplica)
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    served, front = _on_free_ports(config, replica.server_address[1])
    try:
        with _proxy(rewrite(served, {"/v1/dispatch": 12}, maxconn=16), tmp_path, front):
            assert _kept_open(front) == (b"HTTP/1.1 200 OK", True)
            idle = [socket.create_connection(("127.0.0.1", front)) for _ in range(9)]
            try:
                time.sleep(0.2)
                assert _kept_open(front) == (b"HTTP/1.1 200 OK", False)
            finally:
                for s in idle:
                    s.close()
            time.sleep(0.2)
            assert _kept_open(front) == (b"HTTP/1.1 200 OK", True)
    finally:
        replica.shutdown()


def _refused(held: list[socket.socket]) -> int:
    """How many of ``held`` the proxy closed at once (connections refused at accept), read
    after one short wait for them all."""
    time.sleep(0.3)
    closed = 0
    for s in held:
        s.setblocking(False)
        try:
            closed += s.recv(1) == b""
        except BlockingIOError:  # open, nothing to read
            pass
        except OSError:  # reset
            closed += 1
    return closed


def test_a_hosts_share_shrinks_as_the_proxy_nears_full(config, tmp_path):
    """The real HAProxy on a budget of 40 connections (half: 20, nearly full: 32): one host
    holding idle connections is refused once the proxy is nearly full and it holds more than
    ``SHARE_WHEN_NEARLY_FULL``, and a host holding none still gets in and is answered."""
    from ops.haproxy_config import NEARLY_FULL, SHARE_WHEN_NEARLY_FULL

    replica = ThreadingHTTPServer(("127.0.0.1", 0), QuickReplica)
    threading.Thread(target=replica.serve_forever, daemon=True).start()
    served, front = _on_free_ports(config, replica.server_address[1])
    held: list[socket.socket] = []
    try:
        with _proxy(rewrite(served, {"/v1/dispatch": 12}, maxconn=40), tmp_path, front):
            for _ in range(38):
                s = socket.socket()
                s.bind(("127.0.0.2", 0))
                s.connect(("127.0.0.1", front))
                held.append(s)
            kept = len(held) - _refused(held)
            # the rest refused past nearly full (the proxy may still count a connection just
            # closed, such as the readiness probe's)
            assert int(40 * NEARLY_FULL) - 2 <= kept <= int(40 * NEARLY_FULL), kept
            assert kept > SHARE_WHEN_NEARLY_FULL
            assert _kept_open(front, "127.0.0.3")[0] == b"HTTP/1.1 200 OK"
    finally:
        for s in held:
            s.close()
        replica.shutdown()
