"""The compiled reader of a dispatch round's JSON body (``round_json`` is its caller and holds
what it fills to the model).

One pass over the bytes, in machine code: it walks the body as the request's shape (a round
of riders, stops, orders, positions and weights), fills the columns every reader fills
(``round_columns.FilledColumns``: every number read exactly, as ``float`` reads it
(``_json_number_jit``), every string a (start, end) span of the body) and refuses (a status
below 0) what it does not take whole, for the slower readers to answer: malformed JSON, an
unknown or repeated key, a value of another JSON type than the field's, a string with an
escape or a control character, a number it does not read exactly, ``null`` where the field
is not optional, an integer field given a fraction or an exponent, more of anything than the
columns hold.
"""

from __future__ import annotations

import numpy as np
from cffi import FFI
from numba import njit

from serve_app._round_columns_jit import span_is as _is
from serve_app._round_keys_jit import (
    AVAILABLE,
    BOOL_WEIGHT,
    CARRIED,
    DROPOFF,
    INTEGER_WEIGHT,
    ITEM_COUNTS,
    ITEMS,
    KIND_DROPOFF_WORD,
    KIND_PICKUP_WORD,
    MAX_EXACT_INT,
    NEW,
    NOW,
    NULLABLE_WEIGHT,
    OFFSET,
    ORDER,
    ORDER_BIT,
    ORDER_COLUMN,
    ORDER_ID,
    PICKED,
    PICKUP,
    POSITION,
    POSITION_KEY,
    RIDER,
    RIDER_BIT,
    RIDER_COLUMN,
    RIDER_ID,
    ROUTE,
    STOP,
    TOP,
    TOP_BIT,
    WEIGHT_KEY,
    WEIGHTS,
    key_number,
)
from serve_app.http._json_number_jit import read_number
from serve_app.round_columns import (
    KIND_DROPOFF,
    KIND_PICKUP,
    TOP_NOW,
    TOP_OFFSET,
    TOP_PRESENT,
    TOP_WEIGHT_BITS,
    TOP_WEIGHTS,
)

OK = 0
BAD = -1  # not JSON, or not the round's shape
FULL = -2  # more of something than its columns hold

_TRUE = np.frombuffer(b"true", np.uint8).copy()
_FALSE = np.frombuffer(b"false", np.uint8).copy()
_NULL = np.frombuffer(b"null", np.uint8).copy()

_QUOTE, _COLON, _COMMA = 34, 58, 44
_FFI = FFI()
_OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_LIST, _CLOSE_LIST = 123, 125, 91, 93


@njit(cache=True, nogil=True)
def _ws(buf, pos, end):
    while pos < end:
        byte = buf[pos]
        if byte != 32 and byte != 10 and byte != 13 and byte != 9:
            break
        pos += 1
    return pos


@njit(cache=True, nogil=True)
def _string(buf, pos, end):
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
    if end - pos < len(word) or not _is(buf, pos, pos + len(word), word):
        return -1
    return pos + len(word)


@njit(cache=True, nogil=True)
def _key(buf, pos, end, kind):
    """(the key's number in object ``kind``, position of its value) for the member at
    ``pos``; number -1 for a key the object does not have, position -1 where malformed."""
    start, stop, pos = _string(buf, pos, end)
    if pos < 0:
        return -1, -1
    pos = _ws(buf, pos, end)
    if pos >= end or buf[pos] != _COLON:
        return -1, -1
    return key_number(buf, start, stop, kind), _ws(buf, pos + 1, end)


@njit(cache=True, nogil=True)
def _open(buf, pos, end, opening, closing):
    """(empty, position of the first member or after the close) for the container opening
    at ``pos``; position -1 where there is none."""
    if pos >= end or buf[pos] != opening:
        return False, -1
    pos = _ws(buf, pos + 1, end)
    if pos < end and buf[pos] == closing:
        return True, pos + 1
    return False, pos


@njit(cache=True, nogil=True)
def _next(buf, pos, end, closing):
    """After a member or element: (1, the next one's position) after a comma, (0, the position
    after ``closing``), or (-1, -1)."""
    pos = _ws(buf, pos, end)
    if pos < end:
        if buf[pos] == _COMMA:
            return 1, _ws(buf, pos + 1, end)
        if buf[pos] == closing:
            return 0, pos + 1
    return -1, -1


@njit(cache=True, nogil=True)
def _float(buf, pos, end):
    """(value, next) of a number (integer or not); next -1 where there is none."""
    value, _, pos = read_number(buf, pos, end)
    return value, pos


@njit(cache=True, nogil=True)
def _int(buf, pos, end):
    """(value, next) of an integer (no fraction, no exponent, exact as a double)."""
    value, integer, pos = read_number(buf, pos, end)
    if pos < 0 or not integer or abs(value) > MAX_EXACT_INT:
        return 0.0, -1
    return value, pos


@njit(cache=True, nogil=True)
def _position(buf, pos, end):
    """(lat, lng, has lat, has lng, next) of the position object at ``pos``."""
    lat = np.nan
    lng = np.nan
    seen = 0
    empty, pos = _open(buf, pos, end, _OPEN_OBJECT, _CLOSE_OBJECT)
    if pos < 0 or empty:
        return lat, lng, False, False, pos
    while True:
        key, pos = _key(buf, pos, end, POSITION)
        if key < 0 or seen & (1 << key):
            return lat, lng, False, False, -1
        seen |= 1 << key
        value, pos = _float(buf, pos, end)
        if pos < 0:
            return lat, lng, False, False, -1
        if key == 0:
            lat = value
        else:
            lng = value
        more, pos = _next(buf, pos, end, _CLOSE_OBJECT)
        if more < 0:
            return lat, lng, False, False, -1
        if more == 0:
            return lat, lng, (seen & 1) != 0, (seen & 2) != 0, pos


@njit(cache=True, nogil=True)
def _order(buf, pos, end, row, span, values, items, present, counts, count_span, n_counts):
    """Read the order object at ``pos`` into row ``row``, its item counts from ``n_counts``
    on. Returns (next, item counts written so far); next -1 (BAD) or -2 (FULL)."""
    first = n_counts
    present_bits = np.int64(0)
    seen = 0
    empty, pos = _open(buf, pos, end, _OPEN_OBJECT, _CLOSE_OBJECT)
    while pos >= 0 and not empty:
        key, pos = _key(buf, pos, end, ORDER)
        if key < 0 or seen & (1 << key):
            return -1, n_counts
        seen |= 1 << key
        bit = ORDER_BIT[key]
        if bit >= 0:
            present_bits |= np.int64(1) << bit
        if key == ORDER_ID:
            start, stop, pos = _string(buf, pos, end)
            span[row, 0] = start
            span[row, 1] = stop
        elif key == PICKUP or key == DROPOFF:  # noqa: SIM109 (compiled: no tuple)
            lat, lng, has_lat, has_lng, pos = _position(buf, pos, end)
            column = ORDER_COLUMN[key]
            values[row, column] = lat
            values[row, column + 1] = lng
            if has_lat:
                present_bits |= np.int64(1) << (bit + 1)
            if has_lng:
                present_bits |= np.int64(1) << (bit + 2)
        elif key == ITEMS:
            value, pos = _int(buf, pos, end)
            items[row] = np.int64(value)
        elif key == ITEM_COUNTS:
            listed, pos = _open(buf, pos, end, _OPEN_LIST, _CLOSE_LIST)
            while pos >= 0 and not listed:
                value, pos = _int(buf, pos, end)
                if pos < 0:
                    break
                if n_counts >= len(counts):
                    return -2, n_counts
                counts[n_counts] = np.int64(value)
                n_counts += 1
                more, pos = _next(buf, pos, end, _CLOSE_LIST)
                listed = more == 0
        else:
            value, pos = _float(buf, pos, end)
            values[row, ORDER_COLUMN[key]] = value
        if pos < 0:
            return -1, n_counts
        more, pos = _next(buf, pos, end, _CLOSE_OBJECT)
        empty = more == 0
    if pos < 0:
        return -1, n_counts
    present[row] = present_bits
    count_span[row, 0] = first
    count_span[row, 1] = n_counts
    return pos, n_counts


@njit(cache=True, nogil=True)
def _orders(buf, pos, end, row, rows_end, columns, n_counts):
    """Read the list of order objects at ``pos`` into rows ``row`` on (FULL past
    ``rows_end``) of ``columns`` (``_order``'s arrays, in its order). Returns (next, orders
    read, item counts written so far); next -1 (BAD) or -2 (FULL)."""
    span, values, items, present, counts, count_span = columns
    first = row
    listed, pos = _open(buf, pos, end, _OPEN_LIST, _CLOSE_LIST)
    while pos >= 0 and not listed:
        if row >= rows_end:
            return -2, row - first, n_counts
        pos, n_counts = _order(
            buf, pos, end, row, span, values, items, present, counts, count_span, n_counts
        )
        if pos < 0:
            return pos, row - first, n_counts
        row += 1
        more, pos = _next(buf, pos, end, _CLOSE_LIST)
        listed = more == 0
    return pos, row - first, n_counts


@njit(cache=True, nogil=True)
def _null(buf, pos, end):
    """The position after a ``null`` at ``pos``, else -1."""
    return _literal(buf, pos, end, _NULL)


@njit(cache=True, nogil=True)
def fill(
    body,  # uint8[B]
    top,  # float64[9]: round_columns.TOP_*
    rider_span,  # int64[R, 2]
    head,  # float64[R, 5]
    rider_present,  # int64[R]
    rider_lists,  # int64[R, 3]: stops, carried orders, picked-up names
    stop_span,  # int64[S, 2]
    stop_kind,  # int8[S]
    stop_present,  # int64[S]
    order_span,  # int64[C + O, 2]: carried from row 0, new from row ``new_base``
    values,  # float64[C + O, 10]
    items,  # int64[C + O]
    order_present,  # int64[C + O]
    counts,  # int64[IC]
    count_span,  # int64[C + O, 2]
    picked_span,  # int64[N, 2]
    new_base,
):
    """Read the body into the columns (each array's length is what it holds: past it, FULL).
    Returns int64[8]: status (OK, BAD, FULL), then how many riders, stops, carried orders,
    new orders, picked-up names and item counts were read, and the round's keys given (a
    bit per ``TOP_KEYS`` entry)."""
    out = np.zeros(8, np.int64)
    # Helpers take the body as a bare pointer: passing them an array costs two reference
    # counts a call (atomic for the caller's array), most of the walk's time.
    buf = _FFI.from_buffer(body)
    end = len(body)
    columns = (order_span, values, items, order_present, counts, count_span)
    r = 0
    s = 0
    c = 0
    o = new_base
    p = 0
    n_counts = 0
    seen_top = 0
    top_bits = np.int64(0)
    empty, pos = _open(buf, _ws(buf, 0, end), end, _OPEN_OBJECT, _CLOSE_OBJECT)
    while pos >= 0 and not empty:
        key, pos = _key(buf, pos, end, TOP)
        if key < 0 or seen_top & (1 << key):
            out[0] = BAD
            return out
        seen_top |= 1 << key
        if TOP_BIT[key] >= 0:
            top_bits |= np.int64(1) << TOP_BIT[key]
        if key == NOW or key == OFFSET:  # noqa: SIM109 (compiled: no tuple)
            value, pos = _float(buf, pos, end)
            top[TOP_NOW if key == NOW else TOP_OFFSET] = value
        elif key == WEIGHT_KEY:
            wbits = np.int64(0)
            wseen = 0
            closed, pos = _open(buf, pos, end, _OPEN_OBJECT, _CLOSE_OBJECT)
            while pos >= 0 and not closed:
                wkey, pos = _key(buf, pos, end, WEIGHTS)
                if wkey < 0 or wseen & (1 << wkey):
                    out[0] = BAD
                    return out
                wseen |= 1 << wkey
                if NULLABLE_WEIGHT[wkey] and _null(buf, pos, end) >= 0:
                    pos = _null(buf, pos, end)  # null: the default, none
                elif wkey == BOOL_WEIGHT:
                    after = _literal(buf, pos, end, _TRUE)
                    top[TOP_WEIGHTS + wkey] = 1.0
                    if after < 0:
                        after = _literal(buf, pos, end, _FALSE)
                        top[TOP_WEIGHTS + wkey] = 0.0
                    pos = after
                    wbits |= np.int64(1) << wkey
                else:
                    if INTEGER_WEIGHT[wkey]:
                        value, pos = _int(buf, pos, end)
                    else:
                        value, pos = _float(buf, pos, end)
                    top[TOP_WEIGHTS + wkey] = value
                    wbits |= np.int64(1) << wkey
                if pos < 0:
                    break
                more, pos = _next(buf, pos, end, _CLOSE_OBJECT)
                closed = more == 0
            top[TOP_WEIGHT_BITS] = wbits
        elif key == NEW:
            pos, got, n_counts = _orders(buf, pos, end, o, len(order_span), columns, n_counts)
            if pos < 0:
                out[0] = pos
                return out
            o += got
        else:  # the riders
            listed, pos = _open(buf, pos, end, _OPEN_LIST, _CLOSE_LIST)
            while pos >= 0 and not listed:
                if r >= len(rider_span):
                    out[0] = FULL
                    return out
                rbits = np.int64(0)
                rseen = 0
                stops = 0
                carried = 0
                picked = 0
                closed, pos = _open(buf, pos, end, _OPEN_OBJECT, _CLOSE_OBJECT)
                while pos >= 0 and not closed:
                    rkey, pos = _key(buf, pos, end, RIDER)
                    if rkey < 0 or rseen & (1 << rkey):
                        out[0] = BAD
                        return out
                    rseen |= 1 << rkey
                    bit = RIDER_BIT[rkey]
                    if rkey == RIDER_ID:
                        start, stop, pos = _string(buf, pos, end)
                        rider_span[r, 0] = start
                        rider_span[r, 1] = stop
                        rbits |= np.int64(1) << bit
                    elif rkey == POSITION_KEY:
                        lat, lng, has_lat, has_lng, pos = _position(buf, pos, end)
                        head[r, RIDER_COLUMN[rkey]] = lat
                        head[r, RIDER_COLUMN[rkey] + 1] = lng
                        rbits |= np.int64(1) << bit
                        if has_lat:
                            rbits |= np.int64(1) << (bit + 1)
                        if has_lng:
                            rbits |= np.int64(1) << (bit + 2)
                    elif rkey == ROUTE:
                        inner, pos = _open(buf, pos, end, _OPEN_LIST, _CLOSE_LIST)
                        while pos >= 0 and not inner:
                            if s >= len(stop_span):
                                out[0] = FULL
                                return out
                            sseen = 0
                            done, pos = _open(buf, pos, end, _OPEN_OBJECT, _CLOSE_OBJECT)
                            while pos >= 0 and not done:
                                skey, pos = _key(buf, pos, end, STOP)
                                if skey < 0 or sseen & (1 << skey):
                                    out[0] = BAD
                                    return out
                                sseen |= 1 << skey
                                start, stop, pos = _string(buf, pos, end)
                                if skey == 0:
                                    stop_span[s, 0] = start
                                    stop_span[s, 1] = stop
                                elif _is(buf, start, stop, KIND_PICKUP_WORD):
                                    stop_kind[s] = KIND_PICKUP
                                elif _is(buf, start, stop, KIND_DROPOFF_WORD):
                                    stop_kind[s] = KIND_DROPOFF
                                if pos < 0:
                                    break
                                more, pos = _next(buf, pos, end, _CLOSE_OBJECT)
                                done = more == 0
                            if pos < 0:
                                break
                            stop_present[s] = sseen
                            s += 1
                            stops += 1
                            more, pos = _next(buf, pos, end, _CLOSE_LIST)
                            inner = more == 0
                    elif rkey == CARRIED:
                        pos, carried, n_counts = _orders(
                            buf, pos, end, c, new_base, columns, n_counts
                        )
                        if pos < 0:
                            out[0] = pos
                            return out
                        c += carried
                    elif rkey == PICKED:
                        inner, pos = _open(buf, pos, end, _OPEN_LIST, _CLOSE_LIST)
                        while pos >= 0 and not inner:
                            if p >= len(picked_span):
                                out[0] = FULL
                                return out
                            start, stop, pos = _string(buf, pos, end)
                            if pos < 0:
                                break
                            picked_span[p, 0] = start
                            picked_span[p, 1] = stop
                            p += 1
                            picked += 1
                            more, pos = _next(buf, pos, end, _CLOSE_LIST)
                            inner = more == 0
                    elif rkey == AVAILABLE and _null(buf, pos, end) >= 0:
                        pos = _null(buf, pos, end)  # null: none given
                    else:  # speed, capacity, available_at
                        value, pos = _float(buf, pos, end)
                        head[r, RIDER_COLUMN[rkey]] = value
                        rbits |= np.int64(1) << bit
                    if pos < 0:
                        break
                    more, pos = _next(buf, pos, end, _CLOSE_OBJECT)
                    closed = more == 0
                if pos < 0:
                    break
                rider_present[r] = rbits
                rider_lists[r, 0] = stops
                rider_lists[r, 1] = carried
                rider_lists[r, 2] = picked
                r += 1
                more, pos = _next(buf, pos, end, _CLOSE_LIST)
                listed = more == 0
        if pos < 0:
            break
        more, pos = _next(buf, pos, end, _CLOSE_OBJECT)
        empty = more == 0
    if pos < 0 or _ws(buf, pos, end) != end:
        out[0] = BAD
        return out
    top[TOP_PRESENT] = top_bits
    out[1] = r
    out[2] = s
    out[3] = c
    out[4] = o - new_base
    out[5] = p
    out[6] = n_counts
    out[7] = seen_top
    return out


@njit(cache=True, nogil=True)
def capacities(buf):
    """int64[3]: upper bounds on what the body can hold: objects (each opens a brace),
    strings (two quotes each), list elements (a comma or an opening bracket before each)."""
    braces = 0
    quotes = 0
    elements = 0
    for byte in buf:
        if byte == _OPEN_OBJECT:
            braces += 1
        elif byte == _QUOTE:
            quotes += 1
        elif byte == _COMMA or byte == _OPEN_LIST:  # noqa: SIM109 (compiled: no tuple)
            elements += 1
    out = np.empty(3, np.int64)
    out[0] = braces
    out[1] = quotes // 2
    out[2] = elements
    return out
