"""The ingress's own HTTP listener for the lane routes: the same ASGI app, without Serve's
per-request wrapper.

A request through Serve's direct ingress pays the replica's wrapper before our app sees it
(request metadata, a receive proxy task, tracing, Serve's metrics and access log, queue
accounting): Serve's no-op route tops out below what the same FastAPI app with our
middlewares and the whole ``/v1/etr`` pipeline answers served by a bare uvicorn
(``bench/peer_triton.py``, ``bench/flame.py``). So each
Ingress replica also serves its app (the router, our middlewares: the same app Serve serves,
one pipeline) on a listener of its own, on the replica's event loop, and HAProxy sends the
admission lanes' paths there (``ops.haproxy_config``); every other path, and every request
while the listener is not registered, still takes Serve's.

Where HAProxy finds it: the replica binds an ephemeral port and writes it to
``$ORML_LEAN_PORTS_DIR/<replica id>`` before its constructor returns, that is before Serve
puts the replica into HAProxy's config; the config rewrite reads the directory and points
the lane backends' servers at those ports, their health tracking Serve's own server for the
replica. Without ``ORML_LEAN_PORTS_DIR`` (``serve deploy`` of deploy.yaml, a driver's own
``serve.run``) there is no listener and nothing changes.

What Serve's wrapper did and the listener does not: Serve's per-replica request metrics and
access log (HAProxy logs and counts every request at the front; the app's own
``RequestMetrics`` counts these), cancelling a request whose client went away (the pipeline's
deadlines bound every request), and ``max_ongoing_requests`` (the admission lanes and
HAProxy's ``maxconn`` bound them). On shutdown the listener stops accepting and finishes what
it accepted (``stop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import uvicorn

from config import environment
from config.secrets import read_env

log = logging.getLogger("orml.serve")

#: The directory where replicas register their listeners' ports (set by ``orml serve``).
PORTS_DIR_ENV = environment.LEAN_PORTS_DIR.name
#: The address the listeners bind (the HTTP host Serve's own listeners bind).
HOST_ENV = environment.LEAN_HOST.name
#: How long an idle connection is kept open, as Serve's listeners keep theirs: HAProxy reuses
#: its connections to a server for up to 90 s, and one closed under it costs a retry.
LISTENER_KEEP_ALIVE_S = 90


def registered_ports(directory: Path) -> dict[str, int]:
    """Replica id -> its listener's port, as registered in ``directory`` (unreadable or
    half-written entries are skipped: that replica is served through Serve's listener)."""
    ports: dict[str, int] = {}
    try:
        entries = list(directory.iterdir())
    except OSError:
        return ports
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            port = int(entry.read_text().strip())
        except (OSError, ValueError):
            continue
        if 0 < port < 65536:
            ports[entry.name] = port
    return ports


class LeanListener:
    """An app served by uvicorn on the running event loop, on ``port``, registered at
    ``entry``. Build with ``start``."""

    def __init__(self, server: uvicorn.Server, task: asyncio.Task, entry: Path, port: int) -> None:
        self.server, self.task, self.entry, self.port = server, task, entry, port

    @staticmethod
    def wanted() -> bool:
        """Whether the launcher set HAProxy up for the listeners (``ORML_LEAN_PORTS_DIR``)."""
        return bool(read_env(PORTS_DIR_ENV))

    @classmethod
    def start(
        cls, app: Any, replica_id: str, paths: Iterable[str], graceful_s: float = 30.0
    ) -> LeanListener | None:
        """Bind, serve and register, where ``ORML_LEAN_PORTS_DIR`` is set; else None. Must be
        called on the event loop that runs the app's requests (the replica's).

        paths : the routes HAProxy sends here, below the app's route prefix (the prefix is
        what precedes them: Serve's ``root_path``, which the app routes below)."""
        directory = read_env(PORTS_DIR_ENV)
        if not directory:
            return None
        host = read_env(HOST_ENV) or "127.0.0.1"
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))  # the kernel's choice: no window between choosing and binding
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            _BelowPrefix(app, tuple(paths)),
            lifespan="off",
            access_log=False,
            log_config=None,
            log_level="warning",
            timeout_keep_alive=LISTENER_KEEP_ALIVE_S,
            timeout_graceful_shutdown=graceful_s,
        )
        server = _Server(config)
        task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]))
        entry = Path(directory) / replica_id
        entry.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(entry, f"{port}\n")
        log.info("lane routes also served on %s:%d (registered in %s)", host, port, entry)
        return cls(server, task, entry, port)

    async def stop(self) -> None:
        """Unregister, stop accepting, and finish the requests already accepted (up to the
        graceful timeout given to ``start``)."""
        with contextlib.suppress(OSError):
            self.entry.unlink()
        self.server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


class _BelowPrefix:
    """Sets ``root_path`` to the route prefix a request's path carries before one of
    ``paths``, as Serve's listener does from the app's route prefix."""

    def __init__(self, app: Any, paths: tuple[str, ...]) -> None:
        self.app, self.paths = app, paths

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            path = scope.get("path", "")
            for route in self.paths:
                if path.endswith(route) and len(path) > len(route):
                    scope["root_path"] = scope.get("root_path", "") + path[: -len(route)]
                    break
        await self.app(scope, receive, send)


class _Server(uvicorn.Server):
    """uvicorn's server, leaving the process's signal handlers alone (the replica's are
    Ray's: uvicorn would take SIGTERM and SIGINT for itself on the main thread)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _write_atomically(path: Path, text: str) -> None:
    # A reader (the HAProxy config rewrite) sees the whole port or no entry.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
