"""ASGI: the HTTP edge's one router. Every route of ``serve_app.http.routes.ROUTES`` is
answered here, by the endpoint the table names, with the path's parameters in
``request.path_params``; a path the table has with a method it does not take is 405, and
every error an endpoint raises is answered by the one error handler. Only paths outside the
table go on to the app behind: the documentation (``/docs``, ``/redoc``, ``/openapi.json``
and their assets), which answers anything else 404 through the same handler.

Why not FastAPI's router: for a one-order ``POST /v1/etr`` its routing, dependency solving
and exception middleware cost more of the ingress's CPU than the model (``bench/flame.py``),
and every endpoint here reads its own body after admission, so FastAPI's parameter parsing
has nothing to do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from serve_app.http.routes import ROUTES, app_path, resolve_path

ErrorHandler = Callable[[Request, Exception], Awaitable[Response]]


class TableRouter:
    """app : the ASGI app for paths outside the table; endpoints : an object with a method per
    route's ``handler``, each taking the ``Request`` and returning a ``Response`` or a JSON-able
    value; on_error : the app's error handler (exception -> answer)."""

    def __init__(self, app: Any, endpoints: Any, on_error: ErrorHandler) -> None:
        self.app, self.on_error = app, on_error
        self.handlers = {r.path: getattr(endpoints, r.handler) for r in ROUTES}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        found = resolve_path(app_path(scope)) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        route, scope["path_params"] = found
        request = Request(scope, receive)
        try:
            if scope["method"] != route.method:
                raise HTTPException(405, headers={"Allow": route.method})
            answer = await self.handlers[route.path](request)
            if not isinstance(answer, Response):
                answer = JSONResponse(answer)
        except Exception as exc:
            answer = await self.on_error(request, exc)
        await answer(scope, receive, send)
