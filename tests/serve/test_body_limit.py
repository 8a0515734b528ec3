"""What a request body may cost on every route (``serve_app.http.body_limit``), as ASGI: its bytes
(413 past the path's limit) and its time (408 once the request's deadline passes with the body
still arriving), and nothing of either once the body is whole."""

from __future__ import annotations

import asyncio
import json

from serve_app.http.body_limit import BodyLimit


async def echo_body(scope, receive, send):
    """An app that reads the whole body, then waits for the client's disconnect."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})
    assert (await receive())["type"] == "http.disconnect"


def call(app, parts, headers=(), gap_s=0.0, limit=100, default_timeout_s=0.3):
    """Send ``parts`` of a body (``gap_s`` apart; None: stop sending); (status, body)."""
    sent: list[dict] = []
    queue = list(parts)

    async def receive():
        if not queue:
            await asyncio.sleep(gap_s or 0)
            return {"type": "http.disconnect"}
        part = queue.pop(0)
        if part is None:
            await asyncio.sleep(3600)  # the client stopped halfway
        await asyncio.sleep(gap_s)
        return {"type": "http.request", "body": part, "more_body": bool(queue)}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/v2/models/etr/infer"}
    scope["headers"] = list(headers)
    middleware = BodyLimit(app, lambda path: limit, default_timeout_s)
    asyncio.run(asyncio.wait_for(middleware(scope, receive, send), 5))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def test_a_whole_body_in_time_passes_and_the_disconnect_after_it_is_not_timed():
    assert call(echo_body, [b"ab", b"cd"], gap_s=0.1) == (200, b"abcd")


def test_a_body_that_stops_halfway_is_408_at_the_requests_deadline():
    status, body = call(echo_body, [b"ab", None])
    assert status == 408 and "did not arrive within its deadline" in json.loads(body)["detail"]
    # x-timeout-ms sets the deadline: a body arriving slower than the default still passes
    status, _ = call(echo_body, [b"a"] * 4, headers=[(b"x-timeout-ms", b"2000")], gap_s=0.15)
    assert status == 200
    # trickling past the deadline is the same as stopping
    status, _ = call(echo_body, [b"a"] * 10, gap_s=0.1)
    assert status == 408


def test_past_the_byte_limit_is_413():
    status, body = call(echo_body, [b"x" * 60, b"x" * 60])
    assert (
        status == 413 and "body bytes: 120 exceeds the limit of 100" in json.loads(body)["detail"]
    )
