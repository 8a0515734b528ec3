"""msgpack's tokens for the compiled round walk (``_round_walk_jit``), with the names and
signatures of JSON's (``_json_tokens_jit``): each function reads one token at a position of
the body and returns where the next begins, or -1 for what the walk does not take (truncated
or malformed msgpack, a map key that is not a string, binary or extension data, an integer
past 2^53, which a double does not hold exactly). ``buf`` is the body as a bare pointer,
``end`` its length. Numbers are built from their bits with ``ldexp`` (exact), not cast.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from serve_app._round_keys_jit import key_number

_NIL, _FALSE, _TRUE = 0xC0, 0xC2, 0xC3
_MAX_EXACT = 2**53


@njit(cache=True, nogil=True)
def _big_endian(buf, pos, n):
    """The n bytes at ``pos`` as an unsigned big-endian integer (uint64)."""
    value = np.uint64(0)
    for k in range(n):
        value = (value << np.uint64(8)) | np.uint64(buf[pos + k])
    return value


@njit(cache=True, nogil=True)
def _ieee(bits, exponent_bits, mantissa_bits):
    """The IEEE binary float of that layout whose bits are ``bits`` (uint64), as a double."""
    bias = (1 << (exponent_bits - 1)) - 1
    sign = -1.0 if (bits >> np.uint64(exponent_bits + mantissa_bits)) & np.uint64(1) else 1.0
    exponent = np.int64((bits >> np.uint64(mantissa_bits)) & np.uint64((1 << exponent_bits) - 1))
    mantissa = bits & np.uint64((1 << mantissa_bits) - 1)
    if exponent == (1 << exponent_bits) - 1:
        return math.nan if mantissa else sign * math.inf
    if exponent == 0:  # subnormal
        return sign * math.ldexp(np.float64(mantissa), 1 - bias - mantissa_bits)
    whole = mantissa | (np.uint64(1) << np.uint64(mantissa_bits))  # < 2^53: exact as a double
    return sign * math.ldexp(np.float64(whole), exponent - bias - mantissa_bits)


@njit(cache=True, nogil=True)
def number(buf, pos, end):
    """(value, integer, next) of the number at ``pos`` (any int or float format); next -1
    where there is none, or an integer past 2^53."""
    if pos >= end:
        return 0.0, False, -1
    byte = buf[pos]
    if byte <= 0x7F:  # positive fixint
        return np.float64(byte), True, pos + 1
    if byte >= 0xE0:  # negative fixint
        return np.float64(np.int64(byte) - 256), True, pos + 1
    if byte == 0xCA or byte == 0xCB:  # float 32, float 64
        n = 4 if byte == 0xCA else 8
        if pos + 1 + n > end:
            return 0.0, False, -1
        bits = _big_endian(buf, pos + 1, n)
        value = _ieee(bits, 8, 23) if n == 4 else _ieee(bits, 11, 52)
        return value, False, pos + 1 + n
    if 0xCC <= byte <= 0xD3:  # uint 8..64, int 8..64
        n = 1 << ((byte - 0xCC) & 3)
        if pos + 1 + n > end:
            return 0.0, False, -1
        raw = _big_endian(buf, pos + 1, n)
        if byte <= 0xCF:
            if raw > np.uint64(_MAX_EXACT):
                return 0.0, False, -1
            return np.float64(raw), True, pos + 1 + n
        signed = np.int64(raw << np.uint64(64 - 8 * n)) >> np.int64(64 - 8 * n)  # sign-extend
        if signed > _MAX_EXACT or signed < -_MAX_EXACT:
            return 0.0, False, -1
        return np.float64(signed), True, pos + 1 + n
    return 0.0, False, -1


@njit(cache=True, nogil=True)
def _length(buf, pos, end, fix_low, fix_high, fix_mask, first_wide, widths):
    """(count, next) of a header of one family: its fix form in [fix_low, fix_high], then
    ``widths`` wide forms from ``first_wide`` (strings: 1, 2, 4 count bytes; arrays and maps:
    2, 4); next -1 where the header is not of the family."""
    if pos >= end:
        return 0, -1
    byte = buf[pos]
    if fix_low <= byte <= fix_high:
        return np.int64(byte & fix_mask), pos + 1
    k = byte - first_wide
    if 0 <= k < widths:
        n = 1 << (k + (3 - widths))
        if pos + 1 + n > end:
            return 0, -1
        return np.int64(_big_endian(buf, pos + 1, n)), pos + 1 + n
    return 0, -1


@njit(cache=True, nogil=True)
def skip_space(buf, pos, end):
    """msgpack has no whitespace."""
    return pos


@njit(cache=True, nogil=True)
def string(buf, pos, end):
    """(start, end, next) of the string at ``pos``; next -1 where there is none."""
    n, pos = _length(buf, pos, end, 0xA0, 0xBF, 0x1F, 0xD9, 3)
    if pos < 0 or pos + n > end:
        return 0, 0, -1
    return pos, pos + n, pos + n


@njit(cache=True, nogil=True)
def member_name(buf, pos, end):
    """(start, end, position of its value) of the name of the member at ``pos``; position -1
    where the name is not a string."""
    return string(buf, pos, end)


@njit(cache=True, nogil=True)
def key(buf, pos, end, kind):
    """(the key's number in object ``kind``, position of its value); number -1 for a key the
    object does not have, position -1 where the key is not a string."""
    start, stop, pos = member_name(buf, pos, end)
    if pos < 0:
        return -1, -1
    return key_number(buf, start, stop, kind), pos


@njit(cache=True, nogil=True)
def object_begin(buf, pos, end):
    """(members left, position of the first) of the map at ``pos``."""
    return _length(buf, pos, end, 0x80, 0x8F, 0x0F, 0xDE, 2)


@njit(cache=True, nogil=True)
def object_next(buf, pos, end, left):
    """After a member: (members left, the next one's position)."""
    return left - 1, pos


@njit(cache=True, nogil=True)
def array_begin(buf, pos, end):
    """(elements left, position of the first) of the array at ``pos``."""
    return _length(buf, pos, end, 0x90, 0x9F, 0x0F, 0xDC, 2)


@njit(cache=True, nogil=True)
def array_next(buf, pos, end, left):
    """After an element: (elements left, the next one's position)."""
    return left - 1, pos


@njit(cache=True, nogil=True)
def null(buf, pos, end):
    """The position after a nil at ``pos``, else -1."""
    return pos + 1 if pos < end and buf[pos] == _NIL else -1


@njit(cache=True, nogil=True)
def boolean(buf, pos, end):
    """(value, next) of true or false; next -1 for anything else."""
    if pos < end and (buf[pos] == _TRUE or buf[pos] == _FALSE):
        return buf[pos] == _TRUE, pos + 1
    return False, -1
