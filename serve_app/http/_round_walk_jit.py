"""The compiled reader of a dispatch round's body, JSON or msgpack (``round_body`` is its
caller and holds what it fills to the model).

One pass over the bytes, in machine code: it walks the body as the request's shape (a round
of riders, stops, orders, positions and weights), reading each token with its form's
functions (``_json_tokens_jit``, ``_msgpack_tokens_jit``: the same names and signatures), and
fills the columns every reader fills (``round_columns.FilledColumns``: each number as the
double the model reads, each string a (start, end) span of the body). It refuses (a status
below 0) what it does not take whole, for the slower readers to answer: a token its form's
functions refuse, an unknown or repeated key, a value of another type than the field's,
null where the field is not optional, an integer field given a fraction or an exponent (or,
in msgpack, a float), more of anything than the columns hold.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kernels.bare_pointer import data_pointer
from serve_app._round_columns_jit import span_is
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
)
from serve_app.http import _json_tokens_jit as json_tokens
from serve_app.http import _msgpack_tokens_jit as msgpack_tokens
from serve_app.http.codec import MSGPACK_MAX_LIST, MSGPACK_MAX_MAP, MSGPACK_MAX_STR
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
BAD = -1  # not the form's syntax, or not the round's shape
FULL = -2  # more of something than its columns hold
#: The body's form, ``fill``'s last argument.
JSON, MSGPACK = 0, 1
#: A value skipped past a limit (``_skip_value``) is nested at most this deep; its strings
#: are ASCII (valid UTF-8 without a check of their own) and at most this long.
SKIP_DEPTH = 8
SKIP_STRING = MSGPACK_MAX_STR


# Each token read in the body's form (the branch is the same every call: predicted).
@njit(cache=True, nogil=True)
def _skip_space(buf, pos, end, form):
    if form == JSON:
        return json_tokens.skip_space(buf, pos, end)
    return msgpack_tokens.skip_space(buf, pos, end)


@njit(cache=True, nogil=True)
def _string(buf, pos, end, form):
    if form == JSON:
        return json_tokens.string(buf, pos, end)
    return msgpack_tokens.string(buf, pos, end)


@njit(cache=True, nogil=True)
def _key(buf, pos, end, kind, form):
    if form == JSON:
        return json_tokens.key(buf, pos, end, kind)
    return msgpack_tokens.key(buf, pos, end, kind)


@njit(cache=True, nogil=True)
def _member_name(buf, pos, end, form):
    if form == JSON:
        return json_tokens.member_name(buf, pos, end)
    return msgpack_tokens.member_name(buf, pos, end)


@njit(cache=True, nogil=True)
def _object_begin(buf, pos, end, form):
    if form == JSON:
        return json_tokens.object_begin(buf, pos, end)
    return msgpack_tokens.object_begin(buf, pos, end)


@njit(cache=True, nogil=True)
def _object_next(buf, pos, end, left, form):
    if form == JSON:
        return json_tokens.object_next(buf, pos, end, left)
    return msgpack_tokens.object_next(buf, pos, end, left)


@njit(cache=True, nogil=True)
def _array_begin(buf, pos, end, form):
    if form == JSON:
        return json_tokens.array_begin(buf, pos, end)
    return msgpack_tokens.array_begin(buf, pos, end)


@njit(cache=True, nogil=True)
def _array_next(buf, pos, end, left, form):
    if form == JSON:
        return json_tokens.array_next(buf, pos, end, left)
    return msgpack_tokens.array_next(buf, pos, end, left)


@njit(cache=True, nogil=True)
def _number(buf, pos, end, form):
    if form == JSON:
        return json_tokens.number(buf, pos, end)
    return msgpack_tokens.number(buf, pos, end)


@njit(cache=True, nogil=True)
def _null(buf, pos, end, form):
    if form == JSON:
        return json_tokens.null(buf, pos, end)
    return msgpack_tokens.null(buf, pos, end)


@njit(cache=True, nogil=True)
def _boolean(buf, pos, end, form):
    if form == JSON:
        return json_tokens.boolean(buf, pos, end)
    return msgpack_tokens.boolean(buf, pos, end)


@njit(cache=True, nogil=True)
def _float(buf, pos, end, form):
    """(value, next) of a number (integer or not); next -1 where there is none."""
    value, _, pos = _number(buf, pos, end, form)
    return value, pos


@njit(cache=True, nogil=True)
def _int(buf, pos, end, form):
    """(value, next) of an integer (exact as a double)."""
    value, integer, pos = _number(buf, pos, end, form)
    if pos < 0 or not integer or abs(value) > MAX_EXACT_INT:
        return 0.0, -1
    return value, pos


@njit(cache=True, nogil=True)
def _plain(buf, start, stop):
    """Whether the string at [start, stop) is ASCII and at most ``SKIP_STRING`` bytes."""
    if stop - start > SKIP_STRING:
        return False
    for k in range(start, stop):  # noqa: SIM110 (compiled: no generator)
        if buf[k] >= 128:
            return False
    return True


@njit(cache=True, nogil=True)
def _plain_name(buf, pos, end, form):
    """The position of the value of the member at ``pos`` when its name is ``_plain``, else
    -1."""
    start, stop, pos = _member_name(buf, pos, end, form)
    if pos < 0 or not _plain(buf, start, stop):
        return -1
    return pos


@njit(cache=True, nogil=True)
def _skip_value(buf, pos, end, form):
    """The position after the value at ``pos``, whatever it is, or -1 where the slower
    readers might refuse it: not the form's syntax, nested deeper than ``SKIP_DEPTH``, a
    string not ``_plain``, a number the form's reader refuses, a msgpack map or list
    past the msgpack reader's bounds (``codec.unpack_msgpack``).

    A list past its limit is answered 413 by the model only where every value after the limit
    is read as one (``round_body``): this walks those values without keeping them."""
    lefts = np.zeros(SKIP_DEPTH, np.int64)
    in_object = np.zeros(SKIP_DEPTH, np.bool_)
    depth = 0
    while True:
        # One value at pos: a container opens a level, anything else ends here.
        left, after = _object_begin(buf, pos, end, form)
        is_object = after >= 0
        if not is_object:
            left, after = _array_begin(buf, pos, end, form)
            if after >= 0 and left > MSGPACK_MAX_LIST:
                return -1
        elif left > MSGPACK_MAX_MAP:
            return -1
        if after >= 0:
            pos = after
            if left > 0:
                if depth == SKIP_DEPTH:
                    return -1
                lefts[depth] = left
                in_object[depth] = is_object
                depth += 1
                if is_object:
                    pos = _plain_name(buf, pos, end, form)
                    if pos < 0:
                        return -1
                continue
        else:
            start, stop, after = _string(buf, pos, end, form)
            if after >= 0 and not _plain(buf, start, stop):
                return -1
            if after < 0:
                _, _, after = _number(buf, pos, end, form)
            if after < 0:
                after = _null(buf, pos, end, form)
            if after < 0:
                _, after = _boolean(buf, pos, end, form)
            if after < 0:
                return -1
            pos = after
        # The value ended: close every container it was the last of.
        while depth > 0:
            k = depth - 1
            if in_object[k]:
                left, pos = _object_next(buf, pos, end, lefts[k], form)
            else:
                left, pos = _array_next(buf, pos, end, lefts[k], form)
            if pos < 0:
                return -1
            if left == 0:
                depth -= 1
                continue
            lefts[k] = left
            if in_object[k]:
                pos = _plain_name(buf, pos, end, form)
                if pos < 0:
                    return -1
            break
        if depth == 0:
            return pos


@njit(cache=True, nogil=True)
def _member(buf, pos, end, kind, seen, form):
    """(key number, position of its value, ``seen`` with it) of the member at ``pos`` of an
    object ``kind``; key -1 for a key the object lacks or has seen already."""
    key, pos = _key(buf, pos, end, kind, form)
    if key < 0 or seen & (1 << key):
        return -1, -1, seen
    return key, pos, seen | (1 << key)


@njit(cache=True, nogil=True)
def _position(buf, pos, end, form):
    """(lat, lng, has lat, has lng, next) of the position object at ``pos``."""
    lat = np.nan
    lng = np.nan
    seen = 0
    left, pos = _object_begin(buf, pos, end, form)
    while pos >= 0 and left > 0:
        key, pos, seen = _member(buf, pos, end, POSITION, seen, form)
        if key < 0:
            return lat, lng, False, False, -1
        value, pos = _float(buf, pos, end, form)
        if key == 0:
            lat = value
        else:
            lng = value
        if pos < 0:
            break
        left, pos = _object_next(buf, pos, end, left, form)
    return lat, lng, (seen & 1) != 0, (seen & 2) != 0, pos


@njit(cache=True, nogil=True)
def _order(buf, pos, end, row, columns, n_counts, form):
    """Read the order object at ``pos`` into row ``row`` of ``columns`` (span, values, items,
    present, counts, count_span), its item counts from ``n_counts`` on. Returns (next, item
    counts written so far); next -1 (BAD) or -2 (FULL)."""
    span, values, items, present, counts, count_span = columns
    first = n_counts
    present_bits = np.int64(0)
    seen = 0
    left, pos = _object_begin(buf, pos, end, form)
    while pos >= 0 and left > 0:
        key, pos, seen = _member(buf, pos, end, ORDER, seen, form)
        if key < 0:
            return -1, n_counts
        bit = ORDER_BIT[key]
        if bit >= 0:
            present_bits |= np.int64(1) << bit
        if key == ORDER_ID:
            start, stop, pos = _string(buf, pos, end, form)
            span[row, 0] = start
            span[row, 1] = stop
        elif key == PICKUP or key == DROPOFF:  # noqa: SIM109 (compiled: no tuple)
            lat, lng, has_lat, has_lng, pos = _position(buf, pos, end, form)
            column = ORDER_COLUMN[key]
            values[row, column] = lat
            values[row, column + 1] = lng
            if has_lat:
                present_bits |= np.int64(1) << (bit + 1)
            if has_lng:
                present_bits |= np.int64(1) << (bit + 2)
        elif key == ITEMS:
            value, pos = _int(buf, pos, end, form)
            items[row] = np.int64(value)
        elif key == ITEM_COUNTS:
            listed, pos = _array_begin(buf, pos, end, form)
            while pos >= 0 and listed > 0:
                value, pos = _int(buf, pos, end, form)
                if pos < 0:
                    break
                if n_counts >= len(counts):
                    return -2, n_counts
                counts[n_counts] = np.int64(value)
                n_counts += 1
                listed, pos = _array_next(buf, pos, end, listed, form)
        else:
            value, pos = _float(buf, pos, end, form)
            values[row, ORDER_COLUMN[key]] = value
        if pos < 0:
            return -1, n_counts
        left, pos = _object_next(buf, pos, end, left, form)
    if pos < 0:
        return -1, n_counts
    present[row] = present_bits
    count_span[row, 0] = first
    count_span[row, 1] = n_counts
    return pos, n_counts


@njit(cache=True, nogil=True)
def _orders(buf, pos, end, row, rows_end, columns, n_counts, skip_past, form):
    """Read the list of order objects at ``pos`` into rows ``row`` on of ``columns``
    (``_order``'s); past ``rows_end``, FULL, or with ``skip_past`` the rest skipped
    (``_skip_value``) and counted. Returns (next, orders listed, item counts written so
    far); next -1 (BAD) or -2 (FULL)."""
    first = row
    listed, pos = _array_begin(buf, pos, end, form)
    while pos >= 0 and listed > 0:
        if row < rows_end:
            pos, n_counts = _order(buf, pos, end, row, columns, n_counts, form)
        elif skip_past:
            pos = _skip_value(buf, pos, end, form)
        else:
            return -2, row - first, n_counts
        if pos < 0:
            return pos, row - first, n_counts
        row += 1
        listed, pos = _array_next(buf, pos, end, listed, form)
    return pos, row - first, n_counts


@njit(cache=True, nogil=True)
def _weights(buf, pos, end, top, form):
    """Read the weights object at ``pos`` into ``top``; the position after it, or -1."""
    wbits = np.int64(0)
    seen = 0
    left, pos = _object_begin(buf, pos, end, form)
    while pos >= 0 and left > 0:
        key, pos, seen = _member(buf, pos, end, WEIGHTS, seen, form)
        if key < 0:
            return -1
        if NULLABLE_WEIGHT[key] and _null(buf, pos, end, form) >= 0:
            pos = _null(buf, pos, end, form)  # null: the default, none
        elif key == BOOL_WEIGHT:
            value, pos = _boolean(buf, pos, end, form)
            top[TOP_WEIGHTS + key] = 1.0 if value else 0.0
            wbits |= np.int64(1) << key
        else:
            if INTEGER_WEIGHT[key]:
                number, pos = _int(buf, pos, end, form)
            else:
                number, pos = _float(buf, pos, end, form)
            top[TOP_WEIGHTS + key] = number
            wbits |= np.int64(1) << key
        if pos < 0:
            return -1
        left, pos = _object_next(buf, pos, end, left, form)
    top[TOP_WEIGHT_BITS] = wbits
    return pos


@njit(cache=True, nogil=True)
def _stops(buf, pos, end, s, stop_span, stop_kind, stop_present, form):
    """Read a route's list of stops at ``pos`` into rows ``s`` on. Returns (next, stops
    read); next -1 (BAD) or -2 (FULL)."""
    first = s
    listed, pos = _array_begin(buf, pos, end, form)
    while pos >= 0 and listed > 0:
        if s >= len(stop_span):
            return -2, s - first
        seen = 0
        left, pos = _object_begin(buf, pos, end, form)
        while pos >= 0 and left > 0:
            key, pos, seen = _member(buf, pos, end, STOP, seen, form)
            if key < 0:
                return -1, s - first
            start, stop, pos = _string(buf, pos, end, form)
            if key == 0:
                stop_span[s, 0] = start
                stop_span[s, 1] = stop
            elif span_is(buf, start, stop, KIND_PICKUP_WORD):
                stop_kind[s] = KIND_PICKUP
            elif span_is(buf, start, stop, KIND_DROPOFF_WORD):
                stop_kind[s] = KIND_DROPOFF
            if pos < 0:
                break
            left, pos = _object_next(buf, pos, end, left, form)
        if pos < 0:
            return -1, s - first
        stop_present[s] = seen
        s += 1
        listed, pos = _array_next(buf, pos, end, listed, form)
    return pos, s - first


@njit(cache=True, nogil=True)
def _names(buf, pos, end, p, picked_span, form):
    """Read a list of names at ``pos`` into rows ``p`` on. Returns (next, names read); next
    -1 (BAD) or -2 (FULL)."""
    first = p
    listed, pos = _array_begin(buf, pos, end, form)
    while pos >= 0 and listed > 0:
        if p >= len(picked_span):
            return -2, p - first
        start, stop, pos = _string(buf, pos, end, form)
        if pos < 0:
            break
        picked_span[p, 0] = start
        picked_span[p, 1] = stop
        p += 1
        listed, pos = _array_next(buf, pos, end, listed, form)
    return pos, p - first


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
    form,  # JSON or MSGPACK
):
    """Read the body into the columns (each array's length is what it holds: past it, FULL;
    riders and new orders past theirs are skipped by ``_skip_value`` and counted).
    Returns int64[8]: status (OK, BAD, FULL), then how many riders the body lists, stops,
    carried orders, new orders it lists, picked-up names and item counts read, and the
    round's keys given (a bit per ``_round_keys_jit.TOP_KEYS`` entry)."""
    out = np.zeros(8, np.int64)
    # Helpers take the body as a bare pointer: passing them an array costs two reference
    # counts a call (atomic for the caller's array), most of the walk's time.
    buf = data_pointer(body)
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
    left, pos = _object_begin(buf, _skip_space(buf, 0, end, form), end, form)
    while pos >= 0 and left > 0:
        key, pos, seen_top = _member(buf, pos, end, TOP, seen_top, form)
        if key < 0:
            out[0] = BAD
            return out
        if TOP_BIT[key] >= 0:
            top_bits |= np.int64(1) << TOP_BIT[key]
        if key == NOW or key == OFFSET:  # noqa: SIM109 (compiled: no tuple)
            value, pos = _float(buf, pos, end, form)
            top[TOP_NOW if key == NOW else TOP_OFFSET] = value
        elif key == WEIGHT_KEY:
            pos = _weights(buf, pos, end, top, form)
        elif key == NEW:
            pos, got, n_counts = _orders(
                buf, pos, end, o, len(order_span), columns, n_counts, True, form
            )
            o += got
        else:  # the riders
            listed, pos = _array_begin(buf, pos, end, form)
            while pos >= 0 and listed > 0:
                if r >= len(rider_span):
                    # Past the columns (the limit): counted, for the 413 (``round_body``).
                    pos = _skip_value(buf, pos, end, form)
                    if pos < 0:
                        break
                    r += 1
                    listed, pos = _array_next(buf, pos, end, listed, form)
                    continue
                rbits = np.int64(0)
                rseen = 0
                stops = 0
                carried = 0
                picked = 0
                fields, pos = _object_begin(buf, pos, end, form)
                while pos >= 0 and fields > 0:
                    rkey, pos, rseen = _member(buf, pos, end, RIDER, rseen, form)
                    if rkey < 0:
                        out[0] = BAD
                        return out
                    bit = RIDER_BIT[rkey]
                    if rkey == RIDER_ID:
                        start, stop, pos = _string(buf, pos, end, form)
                        rider_span[r, 0] = start
                        rider_span[r, 1] = stop
                        rbits |= np.int64(1) << bit
                    elif rkey == POSITION_KEY:
                        lat, lng, has_lat, has_lng, pos = _position(buf, pos, end, form)
                        head[r, RIDER_COLUMN[rkey]] = lat
                        head[r, RIDER_COLUMN[rkey] + 1] = lng
                        rbits |= np.int64(1) << bit
                        if has_lat:
                            rbits |= np.int64(1) << (bit + 1)
                        if has_lng:
                            rbits |= np.int64(1) << (bit + 2)
                    elif rkey == ROUTE:
                        pos, stops = _stops(
                            buf, pos, end, s, stop_span, stop_kind, stop_present, form
                        )
                        s += stops
                    elif rkey == CARRIED:
                        pos, carried, n_counts = _orders(
                            buf, pos, end, c, new_base, columns, n_counts, False, form
                        )
                        c += carried
                    elif rkey == PICKED:
                        pos, picked = _names(buf, pos, end, p, picked_span, form)
                        p += picked
                    elif rkey == AVAILABLE and _null(buf, pos, end, form) >= 0:
                        pos = _null(buf, pos, end, form)  # null: none given
                    else:  # speed, capacity, available_at
                        value, pos = _float(buf, pos, end, form)
                        head[r, RIDER_COLUMN[rkey]] = value
                        rbits |= np.int64(1) << bit
                    if pos < 0:
                        break
                    fields, pos = _object_next(buf, pos, end, fields, form)
                if pos < 0:
                    break
                rider_present[r] = rbits
                rider_lists[r, 0] = stops
                rider_lists[r, 1] = carried
                rider_lists[r, 2] = picked
                r += 1
                listed, pos = _array_next(buf, pos, end, listed, form)
        if pos < 0:
            out[0] = BAD if pos == -1 else pos
            return out
        left, pos = _object_next(buf, pos, end, left, form)
    if pos < 0 or _skip_space(buf, pos, end, form) != end:
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
