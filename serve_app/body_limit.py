"""ASGI middleware: refuse request bodies over a byte limit with 413, before parsing them.

Checks Content-Length up front and counts streamed bytes too (a chunked body has no length).
The limit is per path (an ETR call's body is smaller than a dispatch round's).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from serve_app.http_routes import app_path
from serve_app.pipeline.errors import TooLarge

BODY_BYTES = "body bytes"


class BodyLimit:
    """limit : the byte limit of a request's path (``http_routes.app_path``), called per
    request, so the replica can set it from its config after start."""

    def __init__(self, app: Any, limit: Callable[[str], int]) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(app_path(scope))
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await _too_large(send, int(value), limit)
                return
        seen = 0

        async def counted() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(seen, limit)
            return message

        try:
            await self.app(scope, counted, send)
        except BodyTooLarge as exc:
            await _too_large(send, exc.got, limit)


class BodyTooLarge(TooLarge):
    """Raised from ``receive`` past the limit. A ``TooLarge`` so that whoever catches it on
    the way out (an endpoint's error handler) answers the same 413 this middleware would."""

    def __init__(self, got: int, limit: int) -> None:
        super().__init__(BODY_BYTES, got, limit)

    def __reduce__(self):
        return (type(self), (self.got, self.limit))


async def _too_large(send: Any, got: int, limit: int) -> None:
    body = json.dumps({"detail": str(TooLarge(BODY_BYTES, got, limit))}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
