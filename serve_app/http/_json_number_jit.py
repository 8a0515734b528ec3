"""A JSON number's text to the nearest double, compiled, exactly as Python's ``float`` reads it
(``_json_tokens_jit`` is its caller).

JSON numbers are decimal: ``w x 10^q`` with up to 19 significant digits fits a 64-bit ``w``.
Where ``w < 2^53`` and ``|q| <= 22`` both factors are doubles and one IEEE multiplication or
division rounds correctly (Clinger's fast path). Elsewhere the Eisel-Lemire algorithm
multiplies ``w`` by a 128-bit truncation of ``5^q`` and rounds from the product (Lemire,
"Number Parsing at a Gigabyte per Second", 2021, sections 5-6; the product always suffices for
a 19-digit ``w``: Mushtak & Lemire, "Fast Number Parsing Without Fallback", 2023). What it
does not read (more than 19 significant digits, a result past the doubles' range or under the
normal ones) it refuses, for a slower reader to take: it never returns an inexact value.
``tests/serve/test_json_number.py`` holds it to ``float`` on millions of texts.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

SMALLEST_POWER = -342  # w x 10^q under this is 0 for every 64-bit w
LARGEST_POWER = 308  # and over this infinite
_MAX_DIGITS = 19  # every 19-digit w fits 64 bits
_MAX_EXPONENT_DIGITS = 6  # an exponent past this many digits is out of range whatever w


def _powers_of_five() -> np.ndarray:
    """uint64[651, 2]: for q in [-342, 308], the 128 leading bits of 5^q (truncated; for
    q < 0 the reciprocal rounded up), most significant word first."""
    rows = []
    for q in range(SMALLEST_POWER, LARGEST_POWER + 1):
        if q >= 0:
            value = 5**q
            shift = value.bit_length() - 128
            value = value >> shift if shift > 0 else value << -shift
        else:
            divisor = 5**-q
            bits = divisor.bit_length() + 127
            if q < -27:
                bits = 2 * divisor.bit_length() + 128
            value = (1 << bits) // divisor + 1
            value >>= max(value.bit_length() - 128, 0)
        rows.append((value >> 64, value & ((1 << 64) - 1)))
    return np.array(rows, np.uint64)


_POW5 = _powers_of_five()
# 10^k for k <= 22: exact doubles (5^22 < 2^53).
_EXACT_TENS = np.array([10.0**k for k in range(23)], np.float64)
_TWO_53 = np.uint64(1) << np.uint64(53)
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)
_LOW32 = np.uint64(0xFFFFFFFF)
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U32 = np.uint64(32)
_U52 = np.uint64(52)
_U63 = np.uint64(63)
_HIDDEN = np.uint64(1) << _U52
_MASK = _ONES >> np.uint64(55)  # the product's bits below the 55 it keeps


@njit(cache=True, nogil=True)
def _mul128(a, b):
    """(high, low) words of the 128-bit product of two uint64."""
    a_lo = a & _LOW32
    a_hi = a >> _U32
    b_lo = b & _LOW32
    b_hi = b >> _U32
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = (lo_lo >> _U32) + (hi_lo & _LOW32) + lo_hi
    high = hi_hi + (hi_lo >> _U32) + (cross >> _U32)
    low = (cross << _U32) | (lo_lo & _LOW32)
    return high, low


@njit(cache=True, nogil=True)
def _leading_zeros(w):
    n = 0
    for step in (32, 16, 8, 4, 2, 1):
        if w >> np.uint64(64 - step) == _U0:
            w <<= np.uint64(step)
            n += step
    return n


@njit(cache=True, nogil=True)
def _eisel_lemire(w, q):
    """The double nearest w x 10^q as (value, ok); w > 0, q in [-342, 308]. Not ok where the
    result is under the normal doubles or infinite."""
    lz = _leading_zeros(w)
    w <<= np.uint64(lz)
    row = q - SMALLEST_POWER
    high, low = _mul128(w, _POW5[row, 0])
    if high & _MASK == _MASK:  # the low bits may carry into the ones kept: one word more
        second_high, _ = _mul128(w, _POW5[row, 1])
        low += second_high
        if second_high > low:
            high += _U1
    if low == _ONES and not -27 <= q <= 55:  # the truncation may have hidden a carry
        return 0.0, False
    upper = np.int64(high >> _U63)
    shift = np.uint64(upper + 9)
    mantissa = high >> shift
    power2 = (((q * (152170 + 65536)) >> 16) + 63) + upper - lz + 1023
    if power2 <= 0:
        return 0.0, False
    # A tie (the product exact and halfway) rounds to even, not up.
    if (
        low <= _U1
        and -4 <= q <= 23
        and mantissa & np.uint64(3) == _U1
        and (mantissa << shift) == high
    ):
        mantissa &= ~_U1
    mantissa += mantissa & _U1
    mantissa >>= _U1
    if mantissa >= (np.uint64(2) << _U52):
        mantissa = _HIDDEN
        power2 += 1
    if power2 >= 0x7FF:
        return 0.0, False
    # mantissa (hidden bit included) < 2^53 converts exactly; scaling by a power of two is exact
    return math.ldexp(np.float64(mantissa), power2 - 1075), True


@njit(cache=True, nogil=True)
def _digit(byte):
    return 48 <= byte <= 57


@njit(cache=True, nogil=True)
def read_number(buf, pos, end):
    """The JSON number at ``buf[pos:]`` (RFC 8259's grammar) as (value, integer, next), where
    integer says the text has no fraction or exponent; next is -1 where the text is not a
    number or is one this reader does not take (see the module). An integer text of zero is
    +0.0 (as an int read as a float is), a fractional one keeps its sign.

    bits, floats : one scratch word as uint64[1] and as float64[1] (views of each other,
    made once by the caller: a view made per number would allocate)."""
    negative = pos < end and buf[pos] == 45  # "-"
    if negative:
        pos += 1
    if pos >= end or not _digit(buf[pos]):
        return 0.0, False, -1
    w = _U0
    digits = 0  # significant digits in w
    if buf[pos] == 48:  # "0": no digit may follow
        pos += 1
        if pos < end and _digit(buf[pos]):
            return 0.0, False, -1
    else:
        while pos < end and _digit(buf[pos]):
            w = w * np.uint64(10) + np.uint64(buf[pos] - 48)
            digits += 1
            pos += 1
    integer = True
    scale = 0  # digits after the point, in w
    if pos < end and buf[pos] == 46:  # "."
        integer = False
        pos += 1
        if pos >= end or not _digit(buf[pos]):
            return 0.0, False, -1
        while pos < end and _digit(buf[pos]):
            if digits or buf[pos] != 48:
                w = w * np.uint64(10) + np.uint64(buf[pos] - 48)
                digits += 1
            scale += 1
            pos += 1
    exponent = 0
    if pos < end and (buf[pos] == 101 or buf[pos] == 69):  # "e", "E"
        integer = False
        pos += 1
        minus = False
        if pos < end and (buf[pos] == 43 or buf[pos] == 45):
            minus = buf[pos] == 45
            pos += 1
        if pos >= end or not _digit(buf[pos]):
            return 0.0, False, -1
        seen = 0
        while pos < end and _digit(buf[pos]):
            exponent = exponent * 10 + (buf[pos] - 48)
            seen += 1
            pos += 1
        if seen > _MAX_EXPONENT_DIGITS:
            return 0.0, False, -1
        if minus:
            exponent = -exponent
    if digits > _MAX_DIGITS:
        return 0.0, False, -1
    if w == _U0:
        value = 0.0
        if negative and not integer:
            value = -0.0
        return value, integer, pos
    q = exponent - scale
    if w <= _TWO_53 and -22 <= q <= 22:
        value = np.float64(w)
        value = value * _EXACT_TENS[q] if q >= 0 else value / _EXACT_TENS[-q]
    else:
        if q < SMALLEST_POWER or q > LARGEST_POWER:
            return 0.0, False, -1
        value, ok = _eisel_lemire(w, q)
        if not ok:
            return 0.0, False, -1
    if negative:
        value = -value
    return value, integer, pos


@njit(cache=True, nogil=True)
def read_numbers(buf, spans, out, taken):
    """Each text at ``spans`` (int64[N, 2]) read whole into ``out`` (float64[N]), ``taken``
    (bool[N]) False where it is not one number this reader takes: what the tests drive."""
    for k in range(spans.shape[0]):
        value, _, nxt = read_number(buf, spans[k, 0], spans[k, 1])
        taken[k] = nxt == spans[k, 1]
        out[k] = value
