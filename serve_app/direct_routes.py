"""ASGI middleware: the hot routes called straight, without FastAPI's router.

A one-order ``POST /v1/etr`` spent more of the ingress's CPU in FastAPI's routing, dependency
solving and exception middleware than in the model (``bench/flame.py``). For the routes named
here the middleware calls the endpoint itself, the same function FastAPI routes to (same
pipeline, same answer), and sends what it raises through the same error handler; every other
request, and the OpenAPI documentation, go through FastAPI as before.

The endpoints are methods of the ingress replica, which registers itself in the app's state
(``app.state.ingress``) when it starts; until then requests take the ordinary path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from serve_app.http_routes import app_path

ErrorHandler = Callable[[Request, Exception], Awaitable[Any]]


class DirectRoutes:
    """routes : (method, path) -> the name of the ingress's endpoint method (taking the
    ``Request``, returning a ``Response``); on_error : the app's exception handler."""

    def __init__(
        self, app: Any, routes: dict[tuple[str, str], str], on_error: ErrorHandler
    ) -> None:
        self.app, self.routes, self.on_error = app, routes, on_error

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            name = self.routes.get((scope["method"], app_path(scope)))
            ingress = getattr(scope["app"].state, "ingress", None) if name else None
            if ingress is not None:
                request = Request(scope, receive)
                try:
                    response = await getattr(ingress, name)(request)
                except Exception as exc:
                    response = await self.on_error(request, exc)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
