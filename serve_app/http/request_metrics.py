"""ASGI middleware: count every HTTP answer by endpoint, status and traffic class.

Plain ASGI (no ``BaseHTTPMiddleware``): it only watches the ``http.response.start`` message go
by, so it adds no task and no copy per request. The endpoint label is a route template
(``routes.route_label``), never the raw path: a caller sending many distinct paths does
not make many series.
"""

from __future__ import annotations

from typing import Any

from serve_app.error_answers import answer_for
from serve_app.http.routes import route_label
from serve_app.ingress_metrics import requests_by_endpoint


class RequestMetrics:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def watched(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        started = False

        async def watched_start(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await watched(message)

        try:
            await self.app(scope, receive, watched_start)
        except BaseException as exc:
            if not started:  # no answer went out: count what the error table makes of it
                status = answer_for(exc).http_status
            raise
        finally:
            priority = "online"
            for name, value in scope.get("headers", ()):
                if name == b"x-priority":
                    priority = "offline" if value.lower() == b"offline" else "online"
            requests_by_endpoint().inc(route_label(scope), str(status), priority)
