"""The HTTP edge: a request's context from its headers, its body parsed only once admitted,
the answer encoded as the caller asked.

Bodies: ``application/json`` (parsed and validated in one pass by pydantic's Rust core) or
``application/x-msgpack`` (the same schemas, binary). Answers: JSON (orjson) unless the
``Accept`` header asks for msgpack. A body that is not valid JSON/msgpack, or not the
endpoint's schema, is 422 naming the field; any other content type is 415.

Headers read: ``x-timeout-ms`` (how long the caller waits; the deadline), ``x-priority``
(``offline`` demotes a request), ``x-request-id``: ``serve_app.pipeline.context``.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgpack
import orjson
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from actors.scheduling import TrafficClass
from serve_app.pipeline.context import CallContext, context_from_metadata
from serve_app.pipeline.errors import FieldError, InvalidInput, UnsupportedMediaType

JSON = "application/json"
MSGPACK = "application/x-msgpack"
ACCEPTED = (JSON, MSGPACK)
_ALIASES = {"": JSON, JSON: JSON, MSGPACK: MSGPACK, "application/msgpack": MSGPACK}

M = TypeVar("M", bound=BaseModel)


def body_media_type(request: Request) -> str:
    """The body's media type, normalised; raises UnsupportedMediaType for others."""
    raw = request.headers.get("content-type", "")
    media = raw.split(";", 1)[0].strip().lower()
    if media not in _ALIASES:
        raise UnsupportedMediaType(raw, ACCEPTED)
    return _ALIASES[media]


def answer_media_type(request: Request) -> str:
    """msgpack if the caller's Accept names it, else JSON."""
    accept = request.headers.get("accept", "")
    return MSGPACK if "msgpack" in accept else JSON


async def parse(request: Request, model: type[M]) -> M:
    """Read and validate the body as ``model``; raises InvalidInput (field paths under
    ``body``), UnsupportedMediaType, or the body limit's TooLarge while reading."""
    media = body_media_type(request)
    body = await request.body()
    try:
        if media == JSON:
            return model.model_validate_json(body)
        try:
            obj = msgpack.unpackb(body, raw=False, strict_map_key=True)
        except Exception as exc:  # msgpack raises several unrelated types for bad bytes
            raise InvalidInput.at(("body",), f"invalid msgpack: {exc}") from None
        return model.model_validate(obj)
    except ValidationError as exc:
        raise invalid_input(exc) from None


def invalid_input(exc: ValidationError, prefix: tuple[str | int, ...] = ("body",)) -> InvalidInput:
    """Pydantic's errors as field errors (paths under ``prefix``; values never echoed)."""
    return InvalidInput(
        [
            FieldError((*prefix, *e.get("loc", ())), e.get("msg", ""), e.get("type", ""))
            for e in exc.errors()
        ]
    )


def encode(request: Request, content: Any, status_code: int = 200, headers: Any = None) -> Response:
    """``content`` (plain dicts, lists, numbers, strings) in the media type the caller asked."""
    if answer_media_type(request) == MSGPACK:
        body = msgpack.packb(content, use_bin_type=True)
        return Response(body, status_code, headers, media_type=MSGPACK)
    body = orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
    return Response(body, status_code, headers, media_type=JSON)


def context(
    request: Request,
    traffic_class: TrafficClass,
    default_timeout_s: float,
    priority_key: str | None = None,
) -> CallContext:
    """The request's context from its headers (``context_from_metadata``)."""
    return context_from_metadata(request.headers, traffic_class, default_timeout_s, priority_key)
