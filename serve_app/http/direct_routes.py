"""ASGI middleware: the hot routes called straight, without FastAPI's router.

A one-order ``POST /v1/etr`` spent more of the ingress's CPU in FastAPI's routing, dependency
solving and exception middleware than in the model (``bench/flame.py``). For the routes named
here the middleware calls the endpoint itself, the same bound method FastAPI routes to (same
pipeline, same answer), and sends what it raises through the same error handler; every other
request, and the OpenAPI documentation, go through FastAPI.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request

from serve_app.http.routes import app_path

ErrorHandler = Callable[[Request, Exception], Awaitable[Any]]
RouteHandler = Callable[[Request], Awaitable[Any]]


class DirectRoutes:
    """routes : (method, path) -> the endpoint (taking the ``Request``, returning a
    ``Response``); on_error : the app's exception handler."""

    def __init__(
        self, app: Any, routes: dict[tuple[str, str], RouteHandler], on_error: ErrorHandler
    ) -> None:
        self.app, self.routes, self.on_error = app, routes, on_error

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            endpoint = self.routes.get((scope["method"], app_path(scope)))
            if endpoint is not None:
                request = Request(scope, receive)
                try:
                    response = await endpoint(request)
                except Exception as exc:
                    response = await self.on_error(request, exc)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
