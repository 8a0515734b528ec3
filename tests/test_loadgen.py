"""``ops.loadgen``: the lean generator the benches drive the app with, against a tiny server
on loopback that answers 200, or 503 with Retry-After to every third request."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import pytest

from ops.loadgen import HttpLoad, encode_request, run_load

#: As HAProxy sheds: 503, Retry-After, then close.
SHED = (
    b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n"
    b"content-length: 2\r\nconnection: close\r\n\r\n{}"
)
OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"


def _content_length(head: bytes) -> int:
    return next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )


Respond = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[bool]]


async def _tiny_server(respond: Respond) -> asyncio.Server:
    """A loopback server calling ``respond(reader, writer, head)`` per request, until it
    returns False (the connection is then closed)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await respond(reader, writer, await reader.readuntil(b"\r\n\r\n")):
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def _serve(counter: list[int]) -> asyncio.Server:
    async def respond(reader, writer, head: bytes) -> bool:
        await reader.readexactly(_content_length(head))
        counter[0] += 1
        writer.write(SHED if counter[0] % 3 == 0 else OK)
        return counter[0] % 3 != 0

    return await _tiny_server(respond)


def _against_server(path: str, max_connections: int, load, runner=asyncio.run) -> tuple:
    """``load(generator, url)`` (a coroutine) against a fresh ``_serve``, on the event loop
    ``runner`` runs: its result and how many requests the server read."""

    async def go():
        counter = [0]
        server = await _serve(counter)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}{path}"
        gen = HttpLoad(url, max_connections=max_connections, timeout_s=5)
        try:
            return await load(gen, url), counter[0]
        finally:
            await gen.close()
            server.close()

    return runner(go())


@pytest.mark.parametrize("runner", [asyncio.run, run_load], ids=["asyncio", "run_load"])
def test_open_loop_sends_the_schedule_and_reads_every_answer(runner):
    run, served = _against_server(
        "/v1/dispatch",
        64,
        lambda gen, url: gen.open_loop([encode_request(url, b"x" * 1000)], 200.0, 1.0, seed=7),
        runner,
    )
    # The arrivals are Poisson from the seed: exactly those sent, each answered.
    rng, at, scheduled = random.Random(7), 0.0, 0
    while at < 1.0:
        scheduled += 1
        at += rng.expovariate(200.0)
    assert len(run.results) == scheduled == served
    assert run.count(200) + run.count(503) == scheduled
    assert run.count(503) == scheduled // 3
    assert all(r.retry_after == 1.0 for r in run.results if r.status == 503)
    # Every request left at or after its time; on an idle loop, within a few ms of it.
    lags = sorted(r.lag_s for r in run.results)
    assert lags[0] >= 0.0 and lags[len(lags) // 2] < 0.05
    assert 0.0 < run.cpu_share < 2.0


def test_closed_loop_keeps_its_workers_busy():
    run, _ = _against_server(
        "/", 8, lambda gen, url: gen.closed_loop([encode_request(url, b"{}")], 4, 0.3)
    )
    assert run.count(200) > 0 and run.count(503) > 0
    assert all(r.lag_s == 0.0 for r in run.results)  # no schedule to be late against


async def _serve_expect(bodies: list[int], silent: bool) -> asyncio.Server:
    """Answers ``Expect: 100-continue`` requests: every second one 503 at once (its body never
    read), the others 100 Continue, then 200 once the body is in; ``silent``: never 100."""
    seen = [0]

    async def respond(reader, writer, head: bytes) -> bool:
        seen[0] += 1
        if b"expect: 100-continue" in head.lower() and not silent:
            if seen[0] % 2 == 0:
                writer.write(SHED)
                return False
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        bodies.append(len(await reader.readexactly(_content_length(head))))
        writer.write(OK)
        return True

    return await _tiny_server(respond)


@pytest.mark.parametrize("silent", [False, True], ids=["answers-100", "never-answers-100"])
def test_a_request_that_expects_100_continue_sends_its_body_only_when_told(silent):
    async def go():
        bodies: list[int] = []
        server = await _serve_expect(bodies, silent)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/dispatch"
        gen = HttpLoad(url, max_connections=4, timeout_s=5)
        request = encode_request(url, b"x" * 150_000, headers={"Expect": "100-continue"})
        try:
            return await gen.sequence([request], 2 if silent else 6), bodies
        finally:
            await gen.close()
            server.close()

    run, bodies = asyncio.run(go())
    if silent:  # the body goes after CONTINUE_WAIT_S without an answer
        assert [r.status for r in run.results] == [200] * 2 and bodies == [150_000] * 2
    else:  # refused on its headers: 503, body never sent, a new connection for the next
        assert [r.status for r in run.results] == [200, 503] * 3
        assert bodies == [150_000] * 3
        assert all(r.retry_after == 1.0 for r in run.results if r.status == 503)
