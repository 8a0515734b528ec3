"""The HTTP edge of one ingress replica, built by it at start (``build_http_app``): the router
of ``serve_app.http.routes.ROUTES`` over the replica's endpoints, one error handler for every
route, and the middlewares in front (the body limit, the request metrics), each handed what it
needs: no state at module level. Behind the router, FastAPI serves only the documentation
(its OpenAPI document built from the same table).

Serve serves this app (the ingress's ``__serve_build_asgi_app__``), and so does the replica's
own listener (``serve_app.http.lean_listener``) where HAProxy's lanes send their requests.
"""

# No ``from __future__ import annotations``: FastAPI reads the endpoints' annotations as types.
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException

from serve_app import kserve_v2
from serve_app.error_answers import (
    answer_for,
    detail_for,
    retry_after_header,
    retry_after_s,
)
from serve_app.http.body_limit import BodyLimit
from serve_app.http.openapi import route_document
from serve_app.http.request_metrics import RequestMetrics
from serve_app.http.router import TableRouter
from serve_app.http.routes import app_path, body_endpoint
from serve_app.pipeline.context import safe_request_id
from serve_app.pipeline.errors import ServingError, Unauthenticated
from serve_app.pipeline.limits import Limits

TITLE = "orml-serve"
VERSION = "0.1.0"
DESCRIPTION = "Food-delivery dispatch rounds (OR route planning + ETR model) on Ray Serve."


async def error_answer(request: Request, exc: Exception) -> Response:
    """Every error, every route: the status and detail from ``serve_app.error_answers``;
    under ``/v2`` the Open Inference Protocol's body, ``{"error": "..."}``, and its 400 for a
    malformed request (``kserve_v2.http_status``)."""
    v2 = app_path(request.scope).startswith(kserve_v2.PREFIX)
    if isinstance(exc, HTTPException):
        body = {"error": str(exc.detail)} if v2 else {"detail": exc.detail}
        return JSONResponse(body, exc.status_code, exc.headers)
    request_id = safe_request_id(request.headers.get("x-request-id")) or uuid.uuid4().hex
    detail = detail_for(exc, request_id)
    content: dict[str, Any] = {"detail": detail}
    headers = {}
    answer = answer_for(exc)
    status = answer.http_status
    if status == 500:
        content["request_id"] = request_id
    if v2:
        content = {"error": str(exc) if isinstance(exc, ServingError) else str(detail)}
        status = kserve_v2.http_status(exc)
    after = retry_after_s(exc)
    if after is not None:
        headers["Retry-After"] = retry_after_header(after)
    if isinstance(exc, Unauthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="orml-serve"'
    return JSONResponse(content, status, headers)


def build_http_app(
    endpoints: Any, limits: Limits, default_timeout_s: float | None = None
) -> FastAPI:
    """The app of ``endpoints`` (``serve_app.http.endpoints.HttpEndpoints``: a method per
    route's ``handler``, each taking the ``Request``), refusing bodies over
    ``limits`` and bodies that have not arrived within the request's deadline
    (``default_timeout_s`` where it sends none; None: no time limit)."""
    # FastAPIOffline: /docs and /redoc load Swagger UI and Redoc from this package's files, not
    # a CDN, so the docs work on a machine without internet. Its own routes are the docs only.
    app = FastAPIOffline(title=TITLE, version=VERSION, description=DESCRIPTION)
    document = route_document(TITLE, VERSION, DESCRIPTION, endpoints)
    app.openapi = lambda: document  # type: ignore[method-assign]
    # The router answers its routes' errors itself; these answer the docs app's: its 404 for
    # a path outside the table, and anything unexpected.
    app.add_exception_handler(Exception, error_answer)
    app.add_exception_handler(HTTPException, error_answer)
    # Innermost first: the router sees requests the body limit and the metrics have seen.
    app.add_middleware(TableRouter, endpoints=endpoints, on_error=error_answer)
    app.add_middleware(
        BodyLimit,
        limit=lambda path: limits.body_bytes(body_endpoint(path)),
        default_timeout_s=default_timeout_s,
    )
    app.add_middleware(RequestMetrics)
    return app
