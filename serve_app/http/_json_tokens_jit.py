"""JSON's tokens for the compiled round walk (``_round_walk_jit``; msgpack's, with the same
names and signatures, are in ``_msgpack_tokens_jit``): each function reads one token at a
position of the body and returns where the next begins, or -1 for what the walk does not take
(malformed JSON, a string with an escape or a control character, a number
``_json_number_jit`` does not read exactly). ``buf`` is the body as a bare pointer, ``end``
its length.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from serve_app._round_columns_jit import span_is
from serve_app._round_keys_jit import key_number
from serve_app.http._json_number_jit import read_number

_TRUE = np.frombuffer(b"true", np.uint8).copy()
_FALSE = np.frombuffer(b"false", np.uint8).copy()
_NULL = np.frombuffer(b"null", np.uint8).copy()
_QUOTE, _COLON, _COMMA = 34, 58, 44
_OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_LIST, _CLOSE_LIST = 123, 125, 91, 93


@njit(cache=True, nogil=True)
def skip_space(buf, pos, end):
    """The position of the first byte at or after ``pos`` that is not JSON whitespace."""
    while pos < end:
        byte = buf[pos]
        if byte != 32 and byte != 10 and byte != 13 and byte != 9:
            break
        pos += 1
    return pos


@njit(cache=True, nogil=True)
def string(buf, pos, end):
    """(start, end, next) of the string whose quote is at ``pos``; next -1 where it is not one
    this reader takes (unterminated, an escape, a control character)."""
    if pos >= end or buf[pos] != _QUOTE:
        return 0, 0, -1
    k = pos + 1
    while k < end:
        byte = buf[k]
        if byte == _QUOTE:
            return pos + 1, k, k + 1
        if byte == 92 or byte < 32:
            return 0, 0, -1
        k += 1
    return 0, 0, -1


@njit(cache=True, nogil=True)
def _literal(buf, pos, end, word):
    """The position after ``word`` where it is at ``pos``, else -1."""
    if end - pos < len(word) or not span_is(buf, pos, pos + len(word), word):
        return -1
    return pos + len(word)


@njit(cache=True, nogil=True)
def member_name(buf, pos, end):
    """(start, end, position of its value) of the name of the member at ``pos``; position -1
    where malformed."""
    start, stop, pos = string(buf, pos, end)
    if pos < 0:
        return 0, 0, -1
    pos = skip_space(buf, pos, end)
    if pos >= end or buf[pos] != _COLON:
        return 0, 0, -1
    return start, stop, skip_space(buf, pos + 1, end)


@njit(cache=True, nogil=True)
def key(buf, pos, end, kind):
    """(the key's number in object ``kind``, position of its value) for the member at
    ``pos``; number -1 for a key the object does not have, position -1 where malformed."""
    start, stop, pos = member_name(buf, pos, end)
    if pos < 0:
        return -1, -1
    return key_number(buf, start, stop, kind), pos


@njit(cache=True, nogil=True)
def _begin(buf, pos, end, opening, closing):
    if pos >= end or buf[pos] != opening:
        return 0, -1
    pos = skip_space(buf, pos + 1, end)
    if pos < end and buf[pos] == closing:
        return 0, pos + 1
    return 1, pos


@njit(cache=True, nogil=True)
def _next(buf, pos, end, closing):
    pos = skip_space(buf, pos, end)
    if pos < end:
        if buf[pos] == _COMMA:
            return 1, skip_space(buf, pos + 1, end)
        if buf[pos] == closing:
            return 0, pos + 1
    return 0, -1


@njit(cache=True, nogil=True)
def object_begin(buf, pos, end):
    """(members left: 1 if some (JSON does not say how many), 0 if none; position of the
    first member, or after the close)."""
    return _begin(buf, pos, end, _OPEN_OBJECT, _CLOSE_OBJECT)


@njit(cache=True, nogil=True)
def object_next(buf, pos, end, left):
    """After a member: (1, the next one's position) after a comma, (0, after the close)."""
    return _next(buf, pos, end, _CLOSE_OBJECT)


@njit(cache=True, nogil=True)
def array_begin(buf, pos, end):
    """As ``object_begin``, for a list's elements."""
    return _begin(buf, pos, end, _OPEN_LIST, _CLOSE_LIST)


@njit(cache=True, nogil=True)
def array_next(buf, pos, end, left):
    """As ``object_next``, for a list's elements."""
    return _next(buf, pos, end, _CLOSE_LIST)


@njit(cache=True, nogil=True)
def number(buf, pos, end):
    """(value, integer, next): ``_json_number_jit.read_number``."""
    return read_number(buf, pos, end)


@njit(cache=True, nogil=True)
def null(buf, pos, end):
    """The position after a ``null`` at ``pos``, else -1."""
    return _literal(buf, pos, end, _NULL)


@njit(cache=True, nogil=True)
def boolean(buf, pos, end):
    """(value, next) of ``true`` or ``false``; next -1 for anything else."""
    after = _literal(buf, pos, end, _TRUE)
    if after >= 0:
        return True, after
    return False, _literal(buf, pos, end, _FALSE)


@njit(cache=True, nogil=True)
def capacities(buf):
    """int64[3]: upper bounds on what the body can hold: objects (each opens a brace),
    strings (two quotes each), list elements (a comma or an opening bracket before each)."""
    braces = 0
    quotes = 0
    elements = 0
    # Counted without a branch: LLVM vectorizes the loop (2.5x the branching loop's speed).
    for k in range(len(buf)):
        byte = buf[k]
        braces += byte == _OPEN_OBJECT
        quotes += byte == _QUOTE
        elements += (byte == _COMMA) | (byte == _OPEN_LIST)
    out = np.empty(3, np.int64)
    out[0] = braces
    out[1] = quotes // 2
    out[2] = elements
    return out
