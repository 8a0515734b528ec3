"""The slow and the dead: what a hostile caller does with connections and time, and what a
dead worker process does to the answers, as scenes beside real traffic.

Each scene is a context manager that runs while real requests are measured
(``real_requests``), so a bench (``bench/slow_and_dead.py``) and the tests
(``tests/serve/test_slow_clients.py``, ``tests/serve/test_dead_workers.py``) run the same
attack:

* ``idle_flood``: a host opens more connections than its budget and sends nothing;
* ``trickled_bodies``: requests whose body arrives a few bytes a second and never ends;
* ``slow_headers``: slowloris, from several hosts: requests whose headers arrive a line at a
  time and never end;
* ``killing_offline_children``: the low-priority processes that run static solves are
  SIGKILLed again and again while static solves arrive.

Linux only (processes are found through ``/proc``); loopback addresses other than 127.0.0.1
stand for other hosts.
"""

from __future__ import annotations

import itertools
import os
import signal
import socket
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ops import processes


@dataclass
class RequestTally:
    """What real requests got during a scene: statuses and latencies (s) of the answered."""

    statuses: Counter[str] = field(default_factory=Counter)
    seconds: list[float] = field(default_factory=list)
    deadline_s: float = 10.0

    def add(self, status: str, seconds: float) -> None:
        self.statuses[status] += 1
        if status == "200":
            self.seconds.append(seconds)

    @property
    def sent(self) -> int:
        return sum(self.statuses.values())

    def within_deadline(self) -> float:
        """Share of the requests answered 200 within their deadline."""
        ok = sum(1 for s in self.seconds if s <= self.deadline_s)
        return ok / self.sent if self.sent else 0.0

    def percentile_ms(self, q: float) -> float | None:
        if not self.seconds:
            return None
        if len(self.seconds) == 1:
            return self.seconds[0] * 1e3
        return statistics.quantiles(self.seconds, n=100, method="inclusive")[int(q) - 1] * 1e3


def real_requests(
    url: str,
    path: str,
    body: bytes | Callable[[int], bytes],
    seconds: float,
    *,
    deadline_s: float = 10.0,
    clients: int = 1,
    stop: threading.Event | None = None,
) -> RequestTally:
    """``clients`` callers sending ``body`` (or ``body(k)`` for the k-th request: a new
    request each time, which no cache answers) to ``path`` one after another for
    ``seconds``, each with ``x-timeout-ms`` = ``deadline_s``; a transport error is tallied by
    its class name."""
    tally = RequestTally(deadline_s=deadline_s)
    lock = threading.Lock()
    until = time.monotonic() + seconds
    headers = {"content-type": "application/json", "x-timeout-ms": str(int(deadline_s * 1e3))}

    sent = itertools.count()

    def caller() -> None:
        with httpx.Client(base_url=url, timeout=deadline_s + 5) as client:
            while time.monotonic() < until and not (stop is not None and stop.is_set()):
                content = body(next(sent)) if callable(body) else body
                t0 = time.perf_counter()
                try:
                    status = str(client.post(path, content=content, headers=headers).status_code)
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                with lock:
                    tally.add(status, time.perf_counter() - t0)

    threads = [threading.Thread(target=caller, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally


def _connect(source: str, port: int, timeout_s: float = 2.0) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((source, 0))
    s.settimeout(timeout_s)
    s.connect(("127.0.0.1", port))
    return s


@contextmanager
def idle_flood(port: int, connections: int, source: str = "127.0.0.2") -> Iterator[dict]:
    """``connections`` idle TCP connections from ``source`` to ``port`` for the scene; yields
    ``{"opened": n, "refused": n}`` (refused at connect; those the proxy closes after accept
    are counted at the end, in ``closed``)."""
    held: list[socket.socket] = []
    stats = {"opened": 0, "refused": 0, "closed": 0}
    try:
        for _ in range(connections):
            try:
                held.append(_connect(source, port))
                stats["opened"] += 1
            except OSError:
                stats["refused"] += 1
        yield stats
    finally:
        for s in held:
            s.setblocking(False)
            try:
                if s.recv(1) == b"":
                    stats["closed"] += 1
            except BlockingIOError:
                pass
            except OSError:
                stats["closed"] += 1
            s.close()


@contextmanager
def trickled_bodies(
    port: int,
    path: str,
    connections: int,
    body_bytes: int = 400_000,
    bytes_per_s: float = 1000.0,
    source: str = "127.0.0.3",
) -> Iterator[dict]:
    """``connections`` requests to ``path`` that announce ``body_bytes`` and send them at
    ``bytes_per_s`` (never finishing within a deadline), each re-opened when the server
    drops it; yields ``{"started": n, "dropped": n}``."""
    stop = threading.Event()
    stats = {"started": 0, "dropped": 0}
    lock = threading.Lock()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: orml\r\ncontent-type: application/json\r\n"
        f"content-length: {body_bytes}\r\n\r\n"
    ).encode()
    chunk = max(1, int(bytes_per_s / 10))

    def trickle() -> None:
        while not stop.is_set():
            try:
                s = _connect(source, port)
            except OSError:
                time.sleep(0.1)
                continue
            with lock:
                stats["started"] += 1
            try:
                s.sendall(head + b"{")
                sent = 1
                while not stop.is_set() and sent < body_bytes - 1:
                    s.sendall(b" " * chunk)
                    sent += chunk
                    stop.wait(0.1)
            except OSError:
                with lock:
                    stats["dropped"] += 1
            finally:
                s.close()

    threads = [threading.Thread(target=trickle, daemon=True) for _ in range(connections)]
    for t in threads:
        t.start()
    try:
        yield stats
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)


@contextmanager
def slow_headers(
    port: int,
    path: str,
    hosts: list[str],
    per_host: int,
    every_s: float = 1.0,
) -> Iterator[dict]:
    """Slowloris from several hosts: ``per_host`` requests to ``path`` from each address in
    ``hosts`` whose headers arrive one short line every ``every_s`` and never end, each opened
    again when the proxy drops it (one thread drives them all); yields ``{"opened": n,
    "dropped": n, "refused": n}`` (refused: at connect)."""
    stop = threading.Event()
    stats = {"opened": 0, "dropped": 0, "refused": 0}
    slots: list[tuple[str, socket.socket | None]] = [
        (host, None) for host in hosts for _ in range(per_host)
    ]
    head = f"POST {path} HTTP/1.1\r\nHost: orml\r\n".encode()

    def drive() -> None:
        line = itertools.count()
        while not stop.is_set():
            tick = time.monotonic()
            for k, (host, s) in enumerate(slots):
                if stop.is_set():
                    break
                try:
                    if s is None:
                        s = _connect(host, port, timeout_s=0.5)
                        stats["opened"] += 1
                        s.setblocking(False)
                        s.send(head)
                    else:
                        s.send(f"x-slow-{next(line)}: 1\r\n".encode())
                except OSError:
                    if s is None:
                        stats["refused"] += 1
                    else:
                        stats["dropped"] += 1
                        s.close()
                    s = None
                slots[k] = (host, s)
            stop.wait(max(0.0, every_s - (time.monotonic() - tick)))

    try:
        with _in_background(drive, stop, join_s=30):
            yield stats
    finally:
        for _, s in slots:
            if s is not None:
                s.close()


def kill_offline_children(deployment: str = "OrSolver", app: str = "orml") -> set[int]:
    """SIGKILL the offline solves' child processes of ``deployment``'s replicas (spawned
    multiprocessing children, not helpers a replica may run); their pids."""
    killed = set()
    for replica in processes.replica_pids(deployment, app):
        for child in processes.children_of(replica):
            if _is_python(child):
                try:
                    os.kill(child, signal.SIGKILL)
                    killed.add(child)
                except OSError:
                    pass
    return killed


@contextmanager
def killing_offline_children(
    every_s: float = 2.0, deployment: str = "OrSolver", app: str = "orml"
) -> Iterator[dict]:
    """``kill_offline_children`` every ``every_s`` for the scene; yields ``{"killed": n}``."""
    stop = threading.Event()
    stats = {"killed": 0}

    def kill() -> None:
        while not stop.wait(every_s):
            stats["killed"] += len(kill_offline_children(deployment, app))

    with _in_background(kill, stop, join_s=every_s + 5):
        yield stats


@contextmanager
def _in_background(
    work: Callable[[], None], stop: threading.Event, join_s: float
) -> Iterator[None]:
    """``work`` on a thread of its own for the block; then ``stop`` is set and the thread
    given ``join_s`` to end."""
    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=join_s)


def _is_python(pid: int) -> bool:
    """A spawned multiprocessing child (not a helper a replica may run, such as a shell)."""
    try:
        return b"multiprocessing" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
