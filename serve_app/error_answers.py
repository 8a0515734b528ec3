"""Errors mapped to answers once, for every protocol: one table, one row per error class (the
classes are defined where they are raised: ``serve_app.pipeline.errors``, ``actors.errors``).

Looked up along the exception's class hierarchy (the nearest listed ancestor wins), so a new
subclass of a listed error needs no new row. Each row gives the HTTP status and the gRPC code;
``Retry-After`` (HTTP) and ``RetryInfo`` (gRPC) come from the error's ``retry_after_s``.
Anything not in the table is a 500 / INTERNAL with a request id only (details go to the log).
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import Any

import grpc
from starlette.requests import ClientDisconnect

from actors.errors import DeviceUnhealthy, WorkerLost
from serve_app.pipeline.errors import (
    BodyTimeout,
    DeadlineExceeded,
    Forbidden,
    InvalidInput,
    NotFound,
    Overloaded,
    ServingError,
    TooLarge,
    Unauthenticated,
    Unavailable,
    UnsupportedMediaType,
)

log = logging.getLogger("orml.serve")


@dataclass(frozen=True)
class Answer:
    http_status: int
    grpc_code: grpc.StatusCode


ERROR_TABLE: dict[type[BaseException], Answer] = {
    InvalidInput: Answer(422, grpc.StatusCode.INVALID_ARGUMENT),
    UnsupportedMediaType: Answer(415, grpc.StatusCode.INVALID_ARGUMENT),
    TooLarge: Answer(413, grpc.StatusCode.RESOURCE_EXHAUSTED),
    Overloaded: Answer(503, grpc.StatusCode.RESOURCE_EXHAUSTED),
    DeadlineExceeded: Answer(504, grpc.StatusCode.DEADLINE_EXCEEDED),
    BodyTimeout: Answer(408, grpc.StatusCode.DEADLINE_EXCEEDED),
    NotFound: Answer(404, grpc.StatusCode.NOT_FOUND),
    Unavailable: Answer(503, grpc.StatusCode.UNAVAILABLE),
    DeviceUnhealthy: Answer(503, grpc.StatusCode.UNAVAILABLE),
    WorkerLost: Answer(503, grpc.StatusCode.UNAVAILABLE),
    Unauthenticated: Answer(401, grpc.StatusCode.UNAUTHENTICATED),
    Forbidden: Answer(403, grpc.StatusCode.PERMISSION_DENIED),
    # The caller went away (its connection closed, a gRPC cancel, the body cut off): nobody
    # reads the answer; 499 is what it is logged as (nginx's "client closed request").
    asyncio.CancelledError: Answer(499, grpc.StatusCode.CANCELLED),
    ClientDisconnect: Answer(499, grpc.StatusCode.CANCELLED),
}
INTERNAL = Answer(500, grpc.StatusCode.INTERNAL)


def answer_for(exc: BaseException) -> Answer:
    """The table's row for ``exc``'s class or its nearest listed ancestor; else INTERNAL."""
    for cls in type(exc).__mro__:
        if cls in ERROR_TABLE:
            return ERROR_TABLE[cls]
    return INTERNAL


def retry_after_s(exc: BaseException) -> float | None:
    """Seconds a client should wait before retrying, for errors that have one."""
    if isinstance(exc, Overloaded | Unavailable):
        return exc.retry_after_s
    if isinstance(exc, DeviceUnhealthy | WorkerLost):
        return 1.0
    return None


def retry_after_header(seconds: float) -> str:
    """HTTP's Retry-After is whole seconds (RFC 9110): rounded up, at least 1."""
    return str(max(1, math.ceil(seconds)))


def detail_for(exc: BaseException, request_id: str) -> Any:
    """The JSON ``detail`` of an answer: field errors as a list, else one message.

    Unknown errors are logged with ``request_id`` and answered with it only.
    """
    if isinstance(exc, InvalidInput):
        return [{"loc": list(e.loc), "msg": e.msg, "type": e.type} for e in exc.errors]
    if isinstance(exc, ServingError | DeviceUnhealthy):
        return str(exc)
    log.error("request %s failed", request_id, exc_info=exc)
    return "internal error"
