"""The HTTP edge's one router (``serve_app.http.router``), as a unit: the app a replica builds,
over endpoints that answer or raise, called in process (no server)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from serve_app.error_answers import ERROR_TABLE, answer_for
from serve_app.http.app import build_http_app
from serve_app.http.routes import ROUTES
from serve_app.pipeline.errors import (
    BodyTimeout,
    DeadlineExceeded,
    FieldError,
    Forbidden,
    InvalidInput,
    NotFound,
    Overloaded,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)
from serve_app.pipeline.limits import Limits


class Answering:
    """A method per route's handler: each records the call and answers its route's path and
    parameters, or raises ``raises``."""

    def __init__(self, raises: BaseException | None = None) -> None:
        self.raises, self.calls = raises, []

    def __getattr__(self, handler: str) -> Any:
        async def endpoint(request):
            self.calls.append(handler)
            if self.raises is not None:
                raise self.raises
            return {"handler": handler, "params": dict(request.path_params)}

        return endpoint


def call(endpoints: Any, method: str, path: str) -> httpx.Response:
    app = build_http_app(endpoints, Limits())

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.request(method, path, content=b"{}")

    return asyncio.run(go())


def concrete(template: str) -> str:
    return template.replace("{model}", "etr").replace("{version}", "2")


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{r.method} {r.path}")
def test_every_route_of_the_table_reaches_its_handler_with_its_parameters(route):
    endpoints = Answering()
    got = call(endpoints, route.method, concrete(route.path))
    assert got.status_code == 200, got.text
    params = {k: v for k, v in (("model", "etr"), ("version", "2")) if f"{{{k}}}" in route.path}
    assert got.json() == {"handler": route.handler, "params": params}
    assert endpoints.calls == [route.handler]


def test_a_path_of_the_table_with_another_method_is_405_naming_the_method_it_takes():
    endpoints = Answering()
    got = call(endpoints, "GET", "/v1/dispatch")
    assert got.status_code == 405 and got.headers["allow"] == "POST"
    assert got.json() == {"detail": "Method Not Allowed"}
    v2 = call(endpoints, "GET", "/v2/models/etr/infer")
    assert v2.status_code == 405 and v2.json() == {"error": "Method Not Allowed"}
    assert endpoints.calls == []


def test_paths_outside_the_table_are_404_or_the_documentation():
    assert call(Answering(), "GET", "/v1/nothing").json() == {"detail": "Not Found"}
    assert call(Answering(), "POST", "/v2/repository/models/etr/load").json() == {
        "error": "Not Found"
    }
    assert call(Answering(), "GET", "/v1/etr/").status_code == 404
    assert call(Answering(), "GET", "/docs").status_code == 200
    spec = call(Answering(), "GET", "/openapi.json").json()
    assert set(spec["paths"]) == {r.path for r in ROUTES if r.public}


ERRORS = [
    InvalidInput([FieldError(("body", "riders"), "too many", "value_error")]),
    UnsupportedMediaType("text/plain", ["application/json"]),
    TooLarge("riders", 5001, 5000),
    Overloaded("queue full", 1.0),
    DeadlineExceeded("late"),
    BodyTimeout("slow body"),
    NotFound("no such model"),
    Unavailable("no replica"),
    Unauthenticated("etr", "no token"),
    Forbidden("admin"),
    RuntimeError("unexpected"),
]


def test_the_errors_cover_the_table():
    assert {type(e) for e in ERRORS} >= {
        cls for cls in ERROR_TABLE if cls.__module__ == "serve_app.pipeline.errors"
    }


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_an_endpoint_raises_is_answered_by_the_table(error):
    got = call(Answering(raises=error), "POST", "/v1/etr")
    assert got.status_code == answer_for(error).http_status
    if got.status_code == 500:
        assert got.json()["detail"] == "internal error" and got.json()["request_id"]
    if isinstance(error, Overloaded):
        assert got.headers["retry-after"] == "1"
