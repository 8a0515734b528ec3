"""Every HTTP answer is counted as what it was: the status that went out, or the one the error
table gives an error that ended the request before any answer (a dropped client: 499); and an
expected 4xx on a FastAPI route is answered inside the app, with no traceback logged."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from starlette.requests import ClientDisconnect

from serve_app.http import request_metrics
from serve_app.pipeline.errors import InvalidInput, Unauthenticated


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, ...]] = []

    def inc(self, *tags: str) -> None:
        self.seen.append(tags)


def run(app, monkeypatch) -> tuple[str, ...]:
    recorder = Recorder()
    monkeypatch.setattr(request_metrics, "requests_by_endpoint", lambda: recorder)
    scope = {"type": "http", "method": "POST", "path": "/v1/dispatch", "headers": []}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        pass

    # The error is re-raised for the server, after counting.
    with contextlib.suppress(BaseException):
        asyncio.run(request_metrics.RequestMetrics(app)(scope, receive, send))
    return recorder.seen[0]


def raising(exc: BaseException):
    async def app(scope, receive, send):
        raise exc

    return app


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (Unauthenticated("dispatch", "no token"), "401"),
        (InvalidInput.at(("body",), "bad"), "422"),
        (ClientDisconnect(), "499"),
        (RuntimeError("a bug"), "500"),
    ],
)
def test_an_error_before_any_answer_is_counted_as_its_answer(monkeypatch, exc, status):
    _, got, _ = run(raising(exc), monkeypatch)
    assert got == status


def test_an_answer_that_went_out_is_counted_by_its_status(monkeypatch):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 403, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    app.answers = True
    assert run(app, monkeypatch)[1] == "403"


def test_counts_reach_ray_within_the_flush_period_with_no_request_after_them():
    from serve_app.ingress_metrics import BulkCounter

    class Counted:
        def __init__(self) -> None:
            self.got: list[tuple[int, dict]] = []

        def inc(self, n, tags):
            self.got.append((n, tags))

    counter = Counted()
    bulk = BulkCounter(counter, ("endpoint",), flush_s=0.05)

    async def burst_then_quiet():
        bulk.flush()  # a flush just happened: the burst below waits for the next
        for _ in range(5):
            bulk.inc("/v1/etr/bulk")
        assert counter.got == []  # summed, not handed over one by one
        await asyncio.sleep(0.2)  # and no request after them

    asyncio.run(burst_then_quiet())
    assert counter.got == [(5, {"endpoint": "/v1/etr/bulk"})]
