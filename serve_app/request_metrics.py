"""ASGI middleware: count every HTTP answer by endpoint, status and traffic class.

Plain ASGI (no ``BaseHTTPMiddleware``): it only watches the ``http.response.start`` message go
by, so it adds no task and no copy per request.
"""

from __future__ import annotations

from typing import Any

from serve_app.metrics import request_counter


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

        try:
            await self.app(scope, receive, watched)
        finally:
            priority = "online"
            for name, value in scope.get("headers", ()):
                if name == b"x-priority":
                    priority = "offline" if value.lower() == b"offline" else "online"
            request_counter().inc(
                tags={
                    "endpoint": scope.get("path", ""),
                    "status": str(status),
                    "priority": priority,
                }
            )
