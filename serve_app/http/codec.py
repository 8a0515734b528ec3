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
import numpy as np
import orjson
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError

from serve_app.pipeline.errors import (
    FieldError,
    InvalidInput,
    ServingError,
    UnsupportedMediaType,
)
from serve_app.schemas import RequestModels

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
    """Read and validate the body as ``model`` (one of ``RequestModels``: bounded by the
    limits); raises InvalidInput (field paths under ``body``), TooLarge (a list past its
    limit), UnsupportedMediaType, or the body limit's TooLarge while reading."""
    body, media = await read_body(request)
    return validate_body(body, media, model)


async def read_body(request: Request) -> tuple[bytes, str]:
    """The body and its media type (JSON or msgpack); raises UnsupportedMediaType, or the body
    limit's TooLarge while reading."""
    media = body_media_type(request)
    return await request.body(), media


def validate_body(body: bytes, media: str, model: type[M]) -> M:
    """``body`` in ``media`` (JSON or msgpack) validated as ``model``; errors as ``parse``."""
    try:
        if media == JSON:
            return model.model_validate_json(body)
        return model.model_validate(unpack_msgpack(body))
    except ValidationError as exc:
        raise invalid_input(exc) from None


#: msgpack bounds: no list longer than the longest a limit allows (checked as its header is
#: read), no map wider than a schema's object, short strings, no binary or extension data.
MSGPACK_MAX_LIST = 100_000
MSGPACK_MAX_MAP = 64
MSGPACK_MAX_STR = 4096
#: What a decoded body may cost, in units of one pointer (8 bytes) per byte of body: a list
#: element is 1 unit, a container 8 (an empty dict is ~64 bytes). Real bodies use < 0.5 a
#: byte; without it a body of 16 M one-byte empty maps would build 16 M dicts (1 GiB).
MSGPACK_UNITS_PER_BYTE = 1
_CONTAINER_UNITS = 8


def unpack_msgpack(body: bytes) -> Any:
    """``body`` decoded, with the bounds above; InvalidInput at ``body`` when it is not msgpack
    or breaks a bound."""
    options: dict[str, Any] = {}
    if msgpack_is_counted(body):
        budget = MSGPACK_UNITS_PER_BYTE * len(body) + 64

        def spend(units: int) -> None:
            nonlocal budget
            budget -= units
            if budget < 0:
                raise _Unbounded("more values than a body of its size holds in any request")

        def on_list(items: list[Any]) -> list[Any]:
            spend(_CONTAINER_UNITS + len(items))
            return items

        def on_map(items: dict[str, Any]) -> dict[str, Any]:
            spend(_CONTAINER_UNITS + len(items))
            return items

        options = {"list_hook": on_list, "object_hook": on_map}
    try:
        return msgpack.unpackb(
            body,
            raw=False,
            strict_map_key=True,
            max_array_len=MSGPACK_MAX_LIST,
            max_map_len=MSGPACK_MAX_MAP,
            max_str_len=MSGPACK_MAX_STR,
            max_bin_len=0,
            max_ext_len=0,
            **options,
        )
    except Exception as exc:  # msgpack raises several unrelated types for bad bytes
        raise InvalidInput.at(("body",), f"invalid msgpack: {str(exc)[:200]}") from None


def msgpack_is_counted(body: bytes) -> bool:
    """Whether ``unpack_msgpack`` counts ``body``'s values as it builds them (and may refuse
    it for holding too many): where it possibly holds more containers than a body of its size
    holds in any request (a Python call per container; a real body never needs it)."""
    return _containers_at_most(body) > MSGPACK_UNITS_PER_BYTE * len(body) // _CONTAINER_UNITS


#: The bytes that start a msgpack container: fixmap, fixarray, array 16/32, map 16/32.
_CONTAINER_BYTES = np.zeros(256, np.bool_)
_CONTAINER_BYTES[0x80:0xA0] = True
_CONTAINER_BYTES[0xDC:0xE0] = True


def _containers_at_most(body: bytes) -> int:
    """An upper bound of the containers in ``body`` (every one starts with one of
    ``_CONTAINER_BYTES``; other bytes may equal them too), counted in C."""
    return int(np.count_nonzero(_CONTAINER_BYTES[np.frombuffer(body, np.uint8)]))


class _Unbounded(ValueError):
    pass


#: Field errors an answer lists at most; a last entry says how many more there were.
MAX_FIELD_ERRORS = 20


def invalid_input(exc: ValidationError, prefix: tuple[str | int, ...] = ("body",)) -> ServingError:
    """Pydantic's errors as the answer: TooLarge when a list passed its configured limit
    (``RequestModels.too_large``), else InvalidInput listing the first ``MAX_FIELD_ERRORS``
    field errors (paths under ``prefix``; values never echoed) and how many more there were."""
    too_large = RequestModels.too_large(exc)
    if too_large is not None:
        return too_large
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    return InvalidInput.capped(
        [
            FieldError((*prefix, *e.get("loc", ())), e.get("msg", ""), e.get("type", ""))
            for e in errors[:MAX_FIELD_ERRORS]
        ],
        total=exc.error_count(),
        at=prefix,
    )


def encode(request: Request, content: Any, status_code: int = 200, headers: Any = None) -> Response:
    """``content`` (plain dicts, lists, numbers, strings) in the media type the caller asked."""
    if answer_media_type(request) == MSGPACK:
        body = msgpack.packb(content, use_bin_type=True)
        return Response(body, status_code, headers, media_type=MSGPACK)
    body = orjson.dumps(content, option=orjson.OPT_SERIALIZE_NUMPY)
    return Response(body, status_code, headers, media_type=JSON)
