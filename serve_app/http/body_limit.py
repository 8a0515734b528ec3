"""ASGI middleware: what a request body may cost, in bytes and in time, on every route.

Bytes: a body over its path's limit is refused with 413 before it is parsed; Content-Length is
checked up front and streamed bytes are counted too (a chunked body has no length). The limit
is per path (an ETR call's body is smaller than a dispatch round's).

Time: the whole body must arrive within the request's deadline (``x-timeout-ms``, else the
default), or it is answered 408: a client that trickles or stops halfway holds nothing for
longer on any route, the admission lanes' or not (the lanes' pipeline bounds its own reads the
same way, ``pipeline.dispatch.read_within_deadline``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from serve_app.http.routes import app_path
from serve_app.pipeline.context import MAX_TIMEOUT_S
from serve_app.pipeline.errors import BodyTimeout, TooLarge

BODY_BYTES = "body bytes"


class BodyLimit:
    """limit : the byte limit of a request's path (``routes.app_path``), called per
    request, so the replica can set it from its config after start; default_timeout_s : a
    request's deadline when it sends no valid ``x-timeout-ms`` (None: no time limit)."""

    def __init__(
        self, app: Any, limit: Callable[[str], int], default_timeout_s: float | None = None
    ) -> None:
        self.app = app
        self.limit = limit
        self.default_timeout_s = default_timeout_s

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(app_path(scope))
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                await _too_large(send, int(value), limit)
                return
        seen, whole = 0, False
        deadline = self._deadline(scope)

        async def counted() -> dict:
            nonlocal seen, whole
            if whole or deadline is None:  # after the body: disconnects, waited for freely
                message = await receive()
            else:
                try:
                    message = await asyncio.wait_for(
                        receive(), max(0.0, deadline - time.monotonic())
                    )
                except TimeoutError:
                    raise BodyTimeout(
                        f"the request's body did not arrive within its deadline "
                        f"({seen} bytes arrived)"
                    ) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                whole = not message.get("more_body", False)
                if seen > limit:
                    raise BodyTooLarge(seen, limit)
            return message

        started = False

        async def watched(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge as exc:
            await _too_large(send, exc.got, limit)
        except BodyTimeout as exc:
            if not started:  # else the app's own error handler has answered already
                await _answer(send, 408, str(exc))

    def _deadline(self, scope: dict) -> float | None:
        """When the request's body must have arrived (monotonic), from ``x-timeout-ms``
        where it is a valid one (the context refuses the others, naming the header)."""
        timeout_s = self.default_timeout_s
        for name, value in scope.get("headers", []):
            if name == b"x-timeout-ms":
                try:
                    asked = float(value) / 1000.0
                except ValueError:
                    break
                if 0 < asked <= MAX_TIMEOUT_S:
                    timeout_s = asked
        return None if timeout_s is None else time.monotonic() + timeout_s


class BodyTooLarge(TooLarge):
    """Raised from ``receive`` past the limit. A ``TooLarge`` so that whoever catches it on
    the way out (an endpoint's error handler) answers the same 413 this middleware would."""

    def __init__(self, got: int, limit: int) -> None:
        super().__init__(BODY_BYTES, got, limit)

    def __reduce__(self):
        return (type(self), (self.got, self.limit))


async def _too_large(send: Any, got: int, limit: int) -> None:
    await _answer(send, 413, str(TooLarge(BODY_BYTES, got, limit)))


async def _answer(send: Any, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})
