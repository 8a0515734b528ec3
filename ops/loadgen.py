"""A lean load generator: open-loop (Poisson or fixed-rate) and closed-loop, over HTTP/1.1 or
gRPC (``GrpcLoad``: serialized messages on one HTTP/2 channel).

Written to cost little CPU on the machine it loads: requests are encoded once up front, each
connection is a raw asyncio stream kept alive, and only the status line and headers are
parsed. Open loop on purpose: arrivals do not wait for answers, so an overloaded server sees
the load a real fleet would send, not a politely slowing client. Every run reports its own
CPU use (``cpu_share``: process CPU seconds per wall second, 1.0 = one core), so a table can
show the generator was not the bottleneck.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")


def run_load(coro: Coroutine[Any, Any, T]) -> T:
    """Run a load's coroutine to its end on uvloop where it is installed (its streams are C:
    the generator takes less of the cores it shares with the server), else on asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


@dataclass(frozen=True)
class Result:
    """One request: sent (s, on this run's clock), latency (s), HTTP status (0: no answer),
    Retry-After (s, or None), index of the body sent, and (open loop) how late it left
    against its schedule (s): a generator short of CPU shows here, sending late in bursts."""

    sent_s: float
    latency_s: float
    status: int
    retry_after: float | None
    body: int
    lag_s: float = 0.0


@dataclass
class Run:
    """What a run produced; ``cpu_share`` is the generator's own CPU use."""

    results: list[Result]
    wall_s: float
    cpu_share: float
    offered_rps: float | None = None

    def ok(self) -> list[Result]:
        return [r for r in self.results if r.status == 200]

    def goodput_rps(self) -> float:
        return len(self.ok()) / self.wall_s if self.wall_s > 0 else 0.0

    def count(self, status: int) -> int:
        return sum(r.status == status for r in self.results)


def encode_request(
    url: str,
    body: bytes,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    method: str = "POST",
) -> bytes:
    """One HTTP/1.1 request, ready to write to a kept-alive connection."""
    parts = urlsplit(url)
    lines = [
        f"{method} {parts.path or '/'} HTTP/1.1",
        f"Host: {parts.netloc}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@dataclass
class _Connection:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


class Load:
    """The load patterns, over any ``send`` (one request -> (status, retry-after s or None)):
    HTTP statuses, or for gRPC 200 (OK), 503 (shed with Retry-After), else an HTTP-like code."""

    async def send(self, request: bytes) -> tuple[int, float | None]:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def open_loop(
        self,
        requests: Sequence[bytes],
        rate_rps: float,
        duration_s: float,
        *,
        poisson: bool = True,
        seed: int = 0,
    ) -> Run:
        """Send at ``rate_rps`` (Poisson or evenly spaced) for ``duration_s``, cycling through
        ``requests``; wait for the answers; the run."""
        rng = random.Random(seed)
        results: list[Result] = []
        tasks: set[asyncio.Task[None]] = set()
        t0, cpu0 = time.perf_counter(), time.process_time()
        at, k = 0.0, 0
        while at < duration_s:
            delay = at - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            task = asyncio.ensure_future(self._timed(requests, k, t0, results, at))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            k += 1
            at += rng.expovariate(rate_rps) if poisson else 1.0 / rate_rps
        if tasks:
            await asyncio.wait(tasks)
        wall = max(time.perf_counter() - t0, duration_s)
        return Run(results, wall, (time.process_time() - cpu0) / wall, rate_rps)

    async def closed_loop(
        self, requests: Sequence[bytes], concurrency: int, duration_s: float
    ) -> Run:
        """``concurrency`` workers, each sending its next request when its last is answered."""
        results: list[Result] = []
        t0, cpu0 = time.perf_counter(), time.process_time()
        counter = iter(range(1 << 62))

        async def worker() -> None:
            while time.perf_counter() - t0 < duration_s:
                await self._timed(requests, next(counter), t0, results)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
        return Run(results, wall, (time.process_time() - cpu0) / wall)

    async def sequence(self, requests: Sequence[bytes], n: int) -> Run:
        """``n`` requests one after another (latency without queueing)."""
        results: list[Result] = []
        t0, cpu0 = time.perf_counter(), time.process_time()
        for k in range(n):
            await self._timed(requests, k, t0, results)
        wall = time.perf_counter() - t0
        return Run(results, wall, (time.process_time() - cpu0) / wall)

    async def _timed(
        self,
        requests: Sequence[bytes],
        k: int,
        t0: float,
        results: list[Result],
        due_s: float | None = None,
    ) -> None:
        sent = time.perf_counter()
        status, retry_after = await self.send(requests[k % len(requests)])
        lag = 0.0 if due_s is None else max(0.0, sent - t0 - due_s)
        results.append(
            Result(
                sent - t0, time.perf_counter() - sent, status, retry_after, k % len(requests), lag
            )
        )


@dataclass
class HttpLoad(Load):
    """Requests to one host:port (``url``'s), over at most ``max_connections`` connections;
    ``timeout_s`` per request (a request over it counts as status 0)."""

    url: str
    max_connections: int = 512
    timeout_s: float = 60.0
    _idle: list[_Connection] = field(default_factory=list)
    _open: int = 0

    async def close(self) -> None:
        for c in self._idle:
            c.writer.close()
        self._idle.clear()

    async def send(self, request: bytes) -> tuple[int, float | None]:
        """Send one encoded request; (status, retry-after). Opens a connection if none idle."""
        conn = self._idle.pop() if self._idle else None
        if conn is None:
            if self._open >= self.max_connections:
                return 0, None
            parts = urlsplit(self.url)
            self._open += 1
            try:
                reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
            except OSError:
                self._open -= 1
                return 0, None
            conn = _Connection(reader, writer)
        try:
            status, retry_after, keep = await asyncio.wait_for(
                _exchange(conn, request), self.timeout_s
            )
        except (OSError, TimeoutError, asyncio.IncompleteReadError, ValueError):
            conn.writer.close()
            self._open -= 1
            return 0, None
        if keep:
            self._idle.append(conn)
        else:
            conn.writer.close()
            self._open -= 1
        return status, retry_after


async def beside_flood(
    url: str,
    online: Sequence[bytes],
    rate_rps: float,
    flood: Sequence[bytes],
    flood_concurrency: int,
    duration_s: float,
    *,
    seed: int = 3,
) -> tuple[Run, Run | None]:
    """Online requests open-loop at ``rate_rps`` while ``flood_concurrency`` closed-loop
    clients send ``flood`` (none when empty), each over connections of its own: (online run,
    flood run or None)."""
    gen_online = HttpLoad(url, max_connections=256, timeout_s=60)
    gen_flood = HttpLoad(url, max_connections=max(8, flood_concurrency), timeout_s=120)
    try:
        tasks = [gen_online.open_loop(online, rate_rps, duration_s, seed=seed)]
        if flood:
            tasks.append(gen_flood.closed_loop(flood, flood_concurrency, duration_s))
        got = await asyncio.gather(*tasks)
        return got[0], (got[1] if flood else None)
    finally:
        await gen_online.close()
        await gen_flood.close()


@dataclass
class GrpcLoad(Load):
    """Unary calls of ``method`` (e.g. "/orml.v1.Orml/Dispatch") to ``address`` (host:port),
    requests already serialized (protobuf bytes, sent as they are), over one HTTP/2 channel.
    ``metadata`` goes with every call (application, authorization)."""

    address: str
    method: str
    timeout_s: float = 60.0
    metadata: tuple[tuple[str, str], ...] = ()
    _call: Any = None
    _channel: Any = None

    async def send(self, request: bytes) -> tuple[int, float | None]:
        import grpc

        if self._call is None:
            options = [("grpc.max_receive_message_length", 256 << 20)]
            self._channel = grpc.aio.insecure_channel(self.address, options=options)
            self._call = self._channel.unary_unary(self.method)  # bytes in, bytes out
        try:
            await self._call(request, timeout=self.timeout_s, metadata=self.metadata)
            return 200, None
        except grpc.aio.AioRpcError as err:
            retry = next(
                (float(v) for k, v in err.trailing_metadata() or () if k == "retry-after"), None
            )
            return _GRPC_AS_HTTP.get(err.code().name, 500) if retry is None else 503, retry

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()


# How a gRPC code reads in a table of HTTP statuses (a shed answer carries retry-after: 503).
_GRPC_AS_HTTP = {
    "INVALID_ARGUMENT": 422,
    "RESOURCE_EXHAUSTED": 413,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 0,
}


#: How long a client that sent ``Expect: 100-continue`` waits for the go-ahead before it sends
#: its body anyway (curl's default): a server may not answer 100 at all.
CONTINUE_WAIT_S = 1.0
_EXPECT = b"\r\nexpect: 100-continue\r\n"


async def _exchange(conn: _Connection, request: bytes) -> tuple[int, float | None, bool]:
    """Write one encoded request and read its answer; (status, retry-after s, reusable).

    A request whose headers say ``Expect: 100-continue`` is sent in two parts: the headers,
    then the body only once the server answers 100 Continue (or after ``CONTINUE_WAIT_S``
    without an answer). A final answer instead of the 100 ends it with the body unsent, and
    the connection is not reused: the server was promised a body that will not come."""
    end = request.find(b"\r\n\r\n") + 4
    if _EXPECT not in request[:end].lower():
        conn.writer.write(request)
        return await _read_response(conn.reader)
    conn.writer.write(request[:end])
    try:
        status, retry_after, _ = await asyncio.wait_for(
            _read_response(conn.reader), CONTINUE_WAIT_S
        )
    except TimeoutError:
        status = 100
    if status != 100:
        return status, retry_after, False
    conn.writer.write(memoryview(request)[end:])
    return await _read_response(conn.reader)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, float | None, bool]:
    """Read one response, past any interim (1xx) answer other than 100, which is returned as
    it comes (``_exchange`` sends the body on it); (status, retry-after s or None, reusable)."""
    head = await reader.readuntil(b"\r\n\r\n")
    while head.startswith(b"HTTP/1.1 1") and not head.startswith(b"HTTP/1.1 100 "):
        head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    length, chunked, keep, retry_after = 0, False, True, None
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
        elif name == "connection" and value.lower() == "close":
            keep = False
        elif name == "retry-after":
            retry_after = float(value)
    if chunked:
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            await reader.readexactly(size + 2)
            if size == 0:
                break
    elif length:
        await reader.readexactly(length)
    return status, retry_after, keep


def percentile_ms(results: Sequence[Result], q: float) -> float:
    """The q-th percentile of the results' latencies, ms (nan when there are none)."""
    values = sorted(r.latency_s for r in results)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, round(q / 100 * (len(values) - 1)))] * 1e3
