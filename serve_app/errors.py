"""Errors mapped to HTTP once: bad input 422 (field named), too big 413 (limit named),
overloaded or unhealthy 503 with Retry-After, anything else 500 with the request id only."""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray.serve.exceptions import BackPressureError

from actors.errors import DeviceUnhealthy
from serve_app.failover import FailoverExhausted
from serve_app.schemas import DomainError

log = logging.getLogger("orml.serve")


class LimitExceeded(Exception):
    """A request over a configured size limit (413)."""

    def __init__(self, what: str, got: int, limit: int) -> None:
        super().__init__(f"{what}: {got} exceeds the limit of {limit}")
        self.what, self.got, self.limit = what, got, limit


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # Field path and message only: the offending value is not echoed back (it may be
        # huge, or NaN/inf, which JSON cannot carry).
        detail = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        return JSONResponse(status_code=422, content={"detail": detail})

    @app.exception_handler(DomainError)
    async def _domain(request: Request, exc: DomainError) -> JSONResponse:
        return JSONResponse(
            status_code=422,
            content={"detail": [{"loc": list(exc.loc), "msg": str(exc), "type": "value_error"}]},
        )

    @app.exception_handler(LimitExceeded)
    async def _limit(request: Request, exc: LimitExceeded) -> JSONResponse:
        return JSONResponse(status_code=413, content={"detail": str(exc)})

    @app.exception_handler(ValueError)
    async def _value(request: Request, exc: ValueError) -> JSONResponse:
        return JSONResponse(
            status_code=422, content={"detail": [{"loc": ["body"], "msg": str(exc)}]}
        )

    @app.exception_handler(DeviceUnhealthy)
    @app.exception_handler(FailoverExhausted)
    @app.exception_handler(BackPressureError)
    async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            status_code=503, headers={"Retry-After": "1"}, content={"detail": str(exc)}
        )

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        request_id = uuid.uuid4().hex
        log.exception("request %s failed", request_id)
        return JSONResponse(
            status_code=500, content={"detail": "internal error", "request_id": request_id}
        )
