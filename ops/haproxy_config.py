"""What ``orml serve`` changes in the HAProxy config Serve writes, before HAProxy reads it.

Serve's throughput mode starts HAProxy with a config it generates (``RAY_SERVE_HAPROXY_
BINARY_PATH`` names the program to run: ``local.haproxy_env`` points it at a wrapper that runs
this module, then the real binary with the same arguments). Three changes:

* **Loopback only for the stats page and the metrics exporter** (Ray binds them to every
  interface; only their ports are configurable).
* **Shedding in front of Python.** Each admission lane with a path of its own gets an HTTP
  backend of its own whose servers (the Ingress replicas) take at most the lane's capacity at
  once (``maxconn`` = the lane's ``max_in_flight`` + ``max_queued``): the requests past it
  wait in HAProxy's queue for ``queue_ms`` (``QUEUE_MS``) and are then answered 503 +
  Retry-After by HAProxy itself. Shed this way a request costs the ingress nothing, where a
  request shed in the ingress has already cost it its body and its Python, and under
  overload that cost is what takes goodput (``bench/overload.py``). Admission in the ingress
  stays the same (classes, deadlines, Retry-After from
  the queue's drain time); HAProxy only keeps the excess from reaching it.

  Each lane backend's server for an Ingress replica that registered a listener of its own
  (``serve_app.http.lean_listener``: the same app without Serve's per-request wrapper) points at
  that listener, its health tracking Serve's server for the same replica; a replica not
  registered is reached through Serve's listener as before.
* **A shed that costs little.** Under heavy overload on a small box, refusing dispatch
  bodies can take as much CPU as the rounds it makes room for (``bench/overload.py``). So a
  lane reads a request's body whole
  (``http-request wait-for-body``, buffers of ``BUFFER_BYTES``) before it queues it: a shed
  request has then been read, and its 503 keeps the connection open, where HAProxy must close
  one whose unread body is still arriving (the client then pays a new connection per shed).
  A client that sends ``Expect: 100-continue`` (as curl and Go's client can for big bodies)
  is refused *before* its body while requests already wait in the lane's queue: the 503
  comes in answer to the headers, and the body never crosses; otherwise HAProxy answers 100
  Continue and reads the body as above. Receiving refused bodies is what bounds goodput
  under heavy overload on a small box.
  The proxy's own 503s carry ``X-Shed: proxy`` and are not logged line by line: Serve's
  collector parses every log line in Python; HAProxy's exporter still counts them (the lane
  backends' 5xx). HAProxy runs one thread per two cores (``proxy_threads``; Serve asks for
  four): on a small box its threads otherwise take the cores the replicas need; and, where it
  may, a few niceness steps above the replicas (``PRIORITY_ABOVE_REPLICAS``), so that the
  one thread answers its sheds on time while the replicas compute.
* **Connections as a budget** (``_connection_budget``, the constants below): short client
  timeouts, ``maxconn`` sized to the file limit, a share per source address that shrinks as
  the proxy fills, and no idle keep-alive once it is half full.

The lanes come from ``ORML_HAPROXY_LANES`` (JSON: {"path": capacity, ...}, paths below the
app's route prefix; a null capacity routes the path to the replicas' own listeners without
shedding it at the proxy), set by ``orml serve`` from the app's ``admission`` config; the
listeners' ports from the directory ``ORML_LEAN_PORTS_DIR`` names.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

from config import environment
from config.secrets import read_env
from serve_app.http.lean_listener import PORTS_DIR_ENV, registered_ports

LANES_ENV = environment.HAPROXY_LANES.name
REAL_BINARY_ENV = environment.HAPROXY_REAL_BINARY.name
#: How long a request past a lane's capacity waits in HAProxy's queue for a slot, then 503.
#: The queue only has to bridge the moment between a slot freeing and the next request
#: taking it (the lane's own ``max_queued`` keeps the replicas fed); under overload each ms
#: of it holds more refused bodies in the proxy and delays every shed answer by as much,
#: with no goodput to show for it (``bench/overload.py --proxy-queue-ms``).
QUEUE_MS = 5
#: ``ORML_HAPROXY_QUEUE_MS=N`` sets the lanes' queue time instead (``bench/overload.py
#: --proxy-queue-ms``).
QUEUE_MS_ENV = environment.HAPROXY_QUEUE_MS.name
SHED_BODY = '{"detail": "shed: the lane is full (at the proxy)"}'
SHED_BEFORE_BODY = '{"detail": "shed: the lane is full (at the proxy, before the body)"}'
#: HAProxy's buffer size: a lane request's body up to this size is read whole before it is
#: queued (typical dispatch rounds fit; larger ones stream). Memory: about two buffers per
#: connection with a request in flight.
BUFFER_BYTES = 256 * 1024
#: Niceness steps HAProxy runs above the process that starts it (Ray's workers, nice 15): a
#: single proxy thread that waits behind a replica's compute holds every shed answer with it
#: (``bench/overload.py`` compares the two).
PRIORITY_ABOVE_REPLICAS = 5
#: ``ORML_HAPROXY_SERVE_DEFAULTS=1`` keeps Serve's buffers, a log line per shed and Ray's
#: niceness (with ``RAY_SERVE_HAPROXY_NBTHREAD=4``, Serve's threads: ``bench/overload.py
#: --proxy-serve-defaults``).
SERVE_DEFAULTS_ENV = environment.HAPROXY_SERVE_DEFAULTS.name


#: The connection budget at the front (what a client may hold without sending a request):
#: a client must send its headers and body within ``REQUEST_S`` and may keep an idle
#: connection ``KEEP_ALIVE_S`` (Serve's defaults: an hour of client silence, 90 s idle), and one
#: source address holds at most ``CONNECTIONS_PER_SOURCE`` connections at once (the rest are
#: refused at accept, counted as the frontend's denied connections in HAProxy's metrics), so
#: a flood of idle or trickling connections from one host leaves the others their share of
#: the proxy's ``maxconn``. The count is per HAProxy process: connections a process accepted
#: before a reload stay with it and are not counted by its successor.
REQUEST_S = 10
KEEP_ALIVE_S = 10
CLIENT_IDLE_S = 120
CONNECTIONS_PER_SOURCE = 1024
#: The proxy's own budget is its file limit, not Serve's fixed 4096: a proxied request holds
#: two descriptors (the client's and the server's) and, with Serve's splicing, a share of
#: HAProxy's pipes (``maxpipes`` is a quarter of ``maxconn``, two descriptors each):
#: ``FDS_PER_CONNECTION`` in all; ``RESERVED_FDS`` stay for listeners, logs and the stats
#: socket; at most ``MAX_CONNECTIONS``. (HAProxy refuses to start when its need passes the
#: hard limit: "Cannot raise FD limit".) Past ``FILLING`` of it the budget tightens, as
#: Envoy's overload manager tightens its limits: a source already holding
#: ``SHARE_WHEN_FILLING`` connections is refused the next (many hosts each under their share
#: cannot fill the proxy, and a host with few connections still gets in), and every HTTP/1
#: answer closes its connection instead of keeping it idle for ``KEEP_ALIVE_S`` (Envoy's
#: ``disable_http_keepalive``): a connection is then held only while a request is on it.
#: Past ``NEARLY_FULL`` the share shrinks to ``SHARE_WHEN_NEARLY_FULL``: hosts that each hold
#: a full share take the proxy only that far, and the rest takes 190 more hosts at 7,589
#: connections (59 with the one share), while a caller holding a few still gets in.
#: The header timeout (``REQUEST_S``) does not tighten: HAProxy 2.8 reads a request's headers
#: before any rule of an HTTP frontend can see the connection, and sets that timeout per
#: frontend only. A TCP-mode frontend can (``tcp-request content switch-mode http if HTTP``,
#: then ``reject if WAIT_END`` past ``FILLING``: tried on 2.8.25), but Serve's HTTP frontend
#: must stay in HTTP mode for its per-request log format, and a TCP gate in front of it
#: would spend four descriptors per client connection instead of two, halving the budget.
RESERVED_FDS = 1024
FDS_PER_CONNECTION = 2.5
MAX_CONNECTIONS = 200_000
FILLING = 0.5
SHARE_WHEN_FILLING = 64
NEARLY_FULL = 0.8
SHARE_WHEN_NEARLY_FULL = 8


def front_connections(nofile: int | None = None) -> int:
    """The proxy's ``maxconn`` for a process whose hard file limit is ``nofile`` (this
    process's where None: HAProxy inherits it)."""
    if nofile is None:
        import resource

        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if nofile == resource.RLIM_INFINITY:
            nofile = 2 * MAX_CONNECTIONS + RESERVED_FDS
    return max(256, min(MAX_CONNECTIONS, int((nofile - RESERVED_FDS) / FDS_PER_CONNECTION)))


#: Failures after which HAProxy sends a request again, on another connection, added to what
#: Serve's config asks for (``RAY_SERVE_HAPROXY_RETRY_ON``, by default connection failures
#: only). Serve's backends send even a client's first request over an idle server connection
#: they keep (``http-reuse always``). When the server closes that connection just as a
#: request goes out on it (its keep-alive ran out, its replica is stopping), nothing comes
#: back, and HAProxy then closes the client's connection without an answer, as it would for
#: a stale keep-alive connection of the client's own: the client sees its new connection
#: closed under its request (Python's ``RemoteDisconnected``). With ``empty-response`` HAProxy
#: sends the request again instead. Every route of the app computes an answer from its request
#: alone, so one sent twice is answered the same; a request HAProxy has not held whole (a body
#: over the buffer, ``BUFFER_BYTES`` on the lanes) cannot be sent again, and one that itself
#: brought its replica down goes to at most HAProxy's ``retries`` (3) others.
RETRY_ON = ("conn-failure", "empty-response")


def rewrite(
    config: str,
    lanes: Mapping[str, int | None],
    queue_ms: int = QUEUE_MS,
    lean_ports: Mapping[str, int] | None = None,
    cheap_sheds: bool = True,
    maxconn: int | None = None,
) -> str:
    """``config`` (Serve's HAProxy config) with the stats and metrics binds on loopback, the
    connection budget (``maxconn``: the proxy's, ``front_connections()`` where None) and a
    shedding backend per lane (see module doc); lean_ports : replica id -> its own listener's
    port (``serve_app.http.lean_listener.registered_ports``); cheap_sheds : lanes read bodies up
    to BUFFER_BYTES whole and do not log their sheds (False: Serve's buffers, a log line per
    shed). A config without Serve's HTTP app backends is returned with the binds and the
    buffer size changed only."""
    config = _loopback_stats(config)
    config = _connection_budget(config, maxconn)
    if cheap_sheds:
        config = _buffers_at_least(config, BUFFER_BYTES)
    body_wait = _body_wait(config)
    for name, body in _app_backends(config):
        shed = []
        for path, capacity in sorted(lanes.items()):
            lane = f"{name}-lane{len(shed)}"
            shed.append((lane, path))
            config += _lane_backend(
                lane, body, capacity, queue_ms, name, lean_ports or {}, cheap_sheds, body_wait
            )
        config = _route_lanes(config, name, shed)
    return config


def _connection_budget(config: str, maxconn: int | None = None) -> str:
    """The defaults' client timeouts cut to the budget above, ``timeout http-request`` added,
    their retries widened (``RETRY_ON``), the global ``maxconn`` sized to the file limit
    (``front_connections``; ``maxconn`` overrides it), per-source connection limits on the
    HTTP and gRPC frontends that tighten past ``FILLING`` of it, and past it no idle
    keep-alive on the HTTP frontend."""
    maxconn = front_connections() if maxconn is None else maxconn
    config = re.sub(r"(?ms)^(global\s*$.*?^\s*maxconn\s+)\d+", rf"\g<1>{maxconn}", config, count=1)

    def timeout(text: str, name: str, seconds: int) -> str:
        line = f"    timeout {name} {seconds}s"
        got = re.search(rf"(?m)^\s*timeout {name}\s+\S+\s*$", text)
        if got:
            return text[: got.start()] + line + text[got.end() :]
        return re.sub(r"(?m)^defaults\s*$", f"defaults\n{line}", text, count=1)

    config = _retry_on(config)
    config = timeout(config, "client", CLIENT_IDLE_S)
    config = timeout(config, "http-keep-alive", KEEP_ALIVE_S)
    config = timeout(config, "http-request", REQUEST_S)
    filling = int(maxconn * FILLING)
    limit = (
        "    stick-table type ipv6 size 100k expire 60s store conn_cur\n"
        "    tcp-request connection track-sc0 src\n"
        f"    tcp-request connection reject if {{ sc_conn_cur(0) gt {CONNECTIONS_PER_SOURCE} }}\n"
        + "".join(
            f"    tcp-request connection reject if {{ fe_conn gt {int(maxconn * full)} }} "
            f"{{ sc_conn_cur(0) gt {share} }}\n"
            for full, share in (
                (FILLING, SHARE_WHEN_FILLING),
                (NEARLY_FULL, SHARE_WHEN_NEARLY_FULL),
            )
        )
    )
    # HTTP/1 only: an HTTP/2 connection (the gRPC frontend's) carries no Connection header.
    no_idle_when_filling = (
        f"    http-after-response set-header Connection close if {{ fe_conn gt {filling} }}\n"
    )
    # A request id the app would refuse, dropped before anything (Serve's own answers
    # included) can echo it.
    hygiene = (
        "    http-request del-header x-request-id if { req.hdr(x-request-id),length gt 128 }\n"
        "    http-request del-header x-request-id if { req.hdr(x-request-id) -m reg "
        "[^A-Za-z0-9._:/+=-] }\n"
    )
    out = []
    section = ""
    for line in config.splitlines(keepends=True):
        words = line.split()
        if words and words[0] in ("global", "defaults", "frontend", "backend", "listen"):
            section = " ".join(words[:2])
        out.append(line)
        fronted = section in ("frontend http_frontend", "frontend grpc_frontend")
        if fronted and words[:1] == ["bind"]:
            out.append(limit)
            if section == "frontend http_frontend":
                out.append(no_idle_when_filling + hygiene)
    return "".join(out)


def _retry_on(config: str) -> str:
    """The defaults' ``retry-on`` with ``RETRY_ON``'s failures added (one is written where
    the config has none)."""
    got = re.search(r"(?m)^(\s*)retry-on\s+([^#\n]*?)\s*$", config)
    if got is None:
        return re.sub(
            r"(?m)^defaults\s*$", f"defaults\n    retry-on {' '.join(RETRY_ON)}", config, count=1
        )
    words = got.group(2).split()
    if "all-retryable-errors" not in words:
        words += [w for w in RETRY_ON if w not in words]
    return config[: got.start()] + f"{got.group(1)}retry-on {' '.join(words)}" + config[got.end() :]


def proxy_threads(cores: int) -> int:
    """HAProxy's threads (``RAY_SERVE_HAPROXY_NBTHREAD``, set by ``local.haproxy_env``) on a
    machine with ``cores`` usable cores: one per two, at least one."""
    return max(1, cores // 2)


def _buffers_at_least(config: str, size: int) -> str:
    def at_least(got: re.Match[str]) -> str:
        return f"{got.group(1)}tune.bufsize {max(int(got.group(2)), size)}"

    return re.sub(r"(?m)^(\s*)tune\.bufsize\s+(\d+)\s*$", at_least, config)


def _body_wait(config: str) -> str:
    """How long a lane waits for a body: what ``option http-buffer-request`` waited (the
    config's ``timeout http-request``, else its ``timeout client``), else HAProxy's 30 s."""
    for name in ("http-request", "client"):
        got = re.search(rf"(?m)^\s*timeout {name}\s+(\S+)\s*$", config)
        if got:
            return got.group(1)
    return "30s"


def _loopback_stats(config: str) -> str:
    out, section = [], ""
    for line in config.splitlines():
        head = line.split()[:2]
        if head and head[0] in ("global", "defaults", "frontend", "backend", "listen"):
            section = " ".join(head)
        if section in ("listen stats", "frontend prometheus") and line.strip().startswith("bind"):
            line = re.sub(r"bind\s+\*?:", "bind 127.0.0.1:", line)
        out.append(line)
    return "\n".join(out) + "\n"


def _app_backends(config: str) -> list[tuple[str, list[str]]]:
    """Serve's HTTP app backends (``backend http-<app>``) and their lines."""
    found, name, body = [], None, []
    for line in config.splitlines():
        words = line.split()
        if words and words[0] in ("global", "defaults", "frontend", "backend", "listen"):
            if name is not None:
                found.append((name, body))
            name = words[1] if words[0] == "backend" and words[1].startswith("http-") else None
            body = []
        elif name is not None:
            body.append(line)
    if name is not None:
        found.append((name, body))
    return found


#: Serve names an ingress replica's server ``SERVE_REPLICA_<app>-<deployment>-<replica id>``.
_REPLICA_SERVER = re.compile(r"^SERVE_REPLICA_.*-(?P<replica>[^-]+)$")


def _lane_backend(
    lane: str,
    body: list[str],
    capacity: int | None,
    queue_ms: int,
    backend: str,
    lean_ports: Mapping[str, int],
    cheap_sheds: bool,
    body_wait: str,
) -> str:
    lines = [f"backend {lane}"]
    for line in body:
        words = line.split()
        if words[:1] == ["server"] and "backup" not in words:
            got = _REPLICA_SERVER.match(words[1])
            port = lean_ports.get(got.group("replica")) if got else None
            if port is not None:
                # The replica's own listener; up and down with Serve's server for it, whose
                # checks ask Serve's health route.
                host = words[2].rsplit(":", 1)[0]
                line = f"    server {words[1]} {host}:{port} no-check track {backend}/{words[1]}"
            if capacity is not None:
                line = f"{line} maxconn {capacity}"
        lines.append(line)
    if capacity is None:
        return "\n".join(lines) + "\n"
    lines += [
        f"    timeout queue {queue_ms}ms",
        f"    http-error status 503 content-type application/json string '{SHED_BODY}' "
        "hdr Retry-After 1 hdr X-Shed proxy",
    ]
    if cheap_sheds:
        lines += [
            # Before the body: a client that asked to be told first is refused while requests
            # already wait for the lane, its body never sent (HAProxy closes the connection:
            # the body it announced will not follow).
            f"    http-request return status 503 content-type application/json string "
            f"'{SHED_BEFORE_BODY}' hdr Retry-After 1 hdr X-Shed proxy "
            "if { req.hdr(expect) -m str -i 100-continue } { queue() gt 0 }",
            # Then the body whole (up to the buffer) before the request is queued; HAProxy
            # answers 100 Continue itself to a client that waits for it.
            f"    http-request wait-for-body time {body_wait}",
            "    http-after-response set-log-level silent if { res.hdr(x-shed) -m found }",
        ]
    return "\n".join(lines) + "\n"


def _route_lanes(config: str, backend: str, lanes: list[tuple[str, str]]) -> str:
    """Send each lane's path to its backend, before the app's own ``use_backend`` rule."""
    rule = f"    use_backend {backend} if is_{backend}"
    if rule not in config:
        return config
    prefix = _route_prefix(config, backend)
    # Matched on the path as the app reads it, percent-decoded once (``/v1/%64ispatch`` is
    # the dispatch lane too): no spelling of a lane's path reaches Python past its shedding.
    ours = "".join(
        f"    use_backend {lane} if is_{backend} {{ path,url_dec {prefix.rstrip('/')}{path} }}\n"
        for lane, path in lanes
    )
    return config.replace(rule, ours + rule, 1)


def _route_prefix(config: str, backend: str) -> str:
    got = re.search(
        rf'set-var-fmt\(txn\.serve_route\) "([^"]*)" if is_{re.escape(backend)}\b', config
    )
    return got.group(1) if got else "/"


def _lean_ports() -> dict[str, int]:
    directory = read_env(PORTS_DIR_ENV)
    return registered_ports(Path(directory)) if directory else {}


def main(argv: list[str]) -> None:
    """The wrapper: rewrite the config named after ``-f``, then run the real HAProxy."""
    lanes = json.loads(read_env(LANES_ENV) or "{}")
    cheap = read_env(SERVE_DEFAULTS_ENV) != "1"
    queue_ms = int(read_env(QUEUE_MS_ENV) or QUEUE_MS)
    if "-f" in argv:
        path = argv[argv.index("-f") + 1]
        if os.path.isfile(path):
            with open(path) as f:
                config = f.read()
            with open(path, "w") as f:
                f.write(
                    rewrite(config, lanes, queue_ms, lean_ports=_lean_ports(), cheap_sheds=cheap)
                )
    real = read_env(REAL_BINARY_ENV)
    if real is None:
        raise SystemExit(f"{REAL_BINARY_ENV} is not set: the real HAProxy binary is unknown")
    if cheap:
        with contextlib.suppress(PermissionError):  # raising a priority takes CAP_SYS_NICE
            os.nice(-PRIORITY_ABOVE_REPLICAS)
    os.execv(real, [real, *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
