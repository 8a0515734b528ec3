"""The compiled reader of an ``orml.v1.DispatchRequest``'s bytes (``round_message`` is its
caller and holds the field numbers' meaning to the model).

Two passes over the serialized message, each one loop in machine code: ``count`` sizes the
columns, ``fill`` reads every scalar into them and every string as a (start, end) span of the
buffer (the columns every reader fills: ``round_columns.FilledColumns``, whose ``*_BITS`` the
presence bits below follow). Both refuse (a status below 0) what the fast path does not take
whole and leaves to protobuf's parser: truncated or malformed bytes, a known field with
another wire type, a singular field given twice (protobuf would merge or overwrite), groups.
Unknown fields are skipped, as the parser keeps them out of the fields the model reads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kernels.bare_pointer import data_pointer
from serve_app._round_columns_jit import span_is as _is

OK = 0
BAD = -1
_MAX_FIELD = (1 << 29) - 1  # protobuf's largest field number

# Wire types.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

# Field number -> the order's value column (-1: not a double of the row).
_ORDER_DOUBLE_COLUMN = np.array([-1, -1, -1, -1, 4, 5, 6, 9, -1, -1, 7, 8], np.int64)
# Field number -> the order's presence bit.
_ORDER_BIT = np.array([-1, 0, 1, 4, 7, 8, 9, 10, 11, -1, 12, 13], np.int64)

_PICKUP = np.frombuffer(b"pickup", np.uint8)
_DROPOFF = np.frombuffer(b"dropoff", np.uint8)


@njit(cache=True, nogil=True)
def _varint(buf, pos, end):
    """(value as uint64, next position), or (0, -1) where it runs past ``end``."""
    value = np.uint64(0)
    shift = np.uint64(0)
    while pos < end:
        byte = buf[pos]
        pos += 1
        value |= np.uint64(byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += np.uint64(7)
        if shift > np.uint64(63):
            return np.uint64(0), -1
    return np.uint64(0), -1


@njit(cache=True, nogil=True)
def _int32(value):
    """A varint as protobuf reads an int32 field: its low 32 bits, signed."""
    low = np.int64(value & np.uint64(0xFFFFFFFF))
    return low - (np.int64(1) << 32) if low >= (np.int64(1) << 31) else low


@njit(cache=True, nogil=True)
def _double(buf, pos, raw, scratch):
    """The little-endian double at ``pos`` (unaligned: copied through ``scratch``, a pointer to
    one float64 whose bytes ``raw`` points to, without allocating)."""
    for k in range(8):
        raw[k] = buf[pos + k]
    return scratch[0]


@njit(cache=True, nogil=True)
def _field(buf, pos, end):
    """(number, wire type, payload start, payload end, next position) of the field at
    ``pos``; next position -1 where the bytes are malformed."""
    key, pos = _varint(buf, pos, end)
    if pos < 0:
        return 0, 0, 0, 0, -1
    number = np.int64(key >> np.uint64(3))
    wire = np.int64(key & np.uint64(7))
    if number == 0 or number > _MAX_FIELD:  # no field has such a number: the parser refuses
        return 0, 0, 0, 0, -1
    start = pos
    if wire == _VARINT:
        _, pos = _varint(buf, pos, end)
        if pos < 0:
            return 0, 0, 0, 0, -1
        return number, wire, start, pos, pos
    if wire == _I64:
        pos += 8
    elif wire == _LEN:
        length, start = _varint(buf, pos, end)
        if start < 0 or length > np.uint64(end - start):
            return 0, 0, 0, 0, -1
        pos = start + np.int64(length)
    elif wire == _I32:
        pos += 4
    else:
        return 0, 0, 0, 0, -1
    if pos > end:
        return 0, 0, 0, 0, -1
    return number, wire, start, pos, pos


@njit(cache=True, nogil=True)
def _count_order(buf, pos, end):
    """Item counts in the order at [pos, end) (an upper bound where unpacked and packed
    mix: exact for what a serializer writes), or -1."""
    items = 0
    while pos < end:
        number, wire, start, stop, pos = _field(buf, pos, end)
        if pos < 0:
            return -1
        if number == 9:
            if wire == _LEN:  # packed: one varint per byte under 0x80
                for k in range(start, stop):
                    if buf[k] < 0x80:
                        items += 1
            else:
                items += 1
    return items


@njit(cache=True, nogil=True)
def count(data):
    """int64[10]: riders, stops, carried orders, picked-up names, new orders, item counts,
    status (``OK`` or ``BAD``), and the most stops, carried orders and picked-up names one
    rider has (what the limits bound per rider)."""
    out = np.zeros(10, np.int64)
    buf = data_pointer(data)  # a bare pointer: see fill
    end = len(data)
    pos = 0
    while pos < end:
        number, wire, start, stop, pos = _field(buf, pos, end)
        if pos < 0:
            out[6] = BAD
            return out
        if wire != _LEN:
            continue
        if number == 2:
            out[0] += 1
            stops = 0
            carried = 0
            picked = 0
            inner = start
            while inner < stop:
                n2, w2, s2, e2, inner = _field(buf, inner, stop)
                if inner < 0:
                    out[6] = BAD
                    return out
                if w2 != _LEN:
                    continue
                if n2 == 5:
                    stops += 1
                elif n2 == 6:
                    carried += 1
                    got = _count_order(buf, s2, e2)
                    if got < 0:
                        out[6] = BAD
                        return out
                    out[5] += got
                elif n2 == 7:
                    picked += 1
            out[1] += stops
            out[2] += carried
            out[3] += picked
            out[7] = max(out[7], stops)
            out[8] = max(out[8], carried)
            out[9] = max(out[9], picked)
        elif number == 3:
            out[4] += 1
            got = _count_order(buf, start, stop)
            if got < 0:
                out[6] = BAD
                return out
            out[5] += got
    return out


@njit(cache=True, nogil=True)
def _position(buf, pos, end, raw, scratch):
    """(lat, lng, has lat, has lng, ok)."""
    lat = np.nan
    lng = np.nan
    has_lat = False
    has_lng = False
    while pos < end:
        number, wire, start, _, pos = _field(buf, pos, end)
        if pos < 0:
            return lat, lng, has_lat, has_lng, False
        if number == 1 or number == 2:
            if wire != _I64:
                return lat, lng, has_lat, has_lng, False
            if number == 1:
                if has_lat:
                    return lat, lng, has_lat, has_lng, False
                lat = _double(buf, start, raw, scratch)
                has_lat = True
            else:
                if has_lng:
                    return lat, lng, has_lat, has_lng, False
                lng = _double(buf, start, raw, scratch)
                has_lng = True
    return lat, lng, has_lat, has_lng, True


@njit(cache=True, nogil=True)
def _order(
    buf, pos, end, row, span, values, items, present, counts, count_span, n_counts, raw, scratch
):
    """Read the order at [pos, end) into row ``row``; its item counts from ``n_counts`` on.
    Returns the item counts written so far, or -1."""
    bits = np.int64(0)
    first = n_counts
    while pos < end:
        number, wire, start, stop, pos = _field(buf, pos, end)
        if pos < 0:
            return -1
        if number < 1 or number > 11:
            continue  # unknown: skipped, as the parser keeps it out of the fields
        if number == 9:  # item_counts: packed or not
            if wire == _LEN:
                k = start
                while k < stop:
                    value, k = _varint(buf, k, stop)
                    if k < 0:
                        return -1
                    counts[n_counts] = _int32(value)
                    n_counts += 1
            elif wire == _VARINT:
                value, _ = _varint(buf, start, stop)
                counts[n_counts] = _int32(value)
                n_counts += 1
            else:
                return -1
            continue
        bit = _ORDER_BIT[number]
        if bits & (np.int64(1) << bit):
            return -1  # given twice
        bits |= np.int64(1) << bit
        if number == 1:
            if wire != _LEN:
                return -1
            span[row, 0] = start
            span[row, 1] = stop
        elif number == 2 or number == 3:
            if wire != _LEN:
                return -1
            lat, lng, has_lat, has_lng, ok = _position(buf, start, stop, raw, scratch)
            if not ok:
                return -1
            column = 0 if number == 2 else 2
            values[row, column] = lat
            values[row, column + 1] = lng
            if has_lat:
                bits |= np.int64(1) << (bit + 1)
            if has_lng:
                bits |= np.int64(1) << (bit + 2)
        elif number == 8:
            if wire != _VARINT:
                return -1
            value, _ = _varint(buf, start, stop)
            items[row] = _int32(value)
        else:
            if wire != _I64:
                return -1
            values[row, _ORDER_DOUBLE_COLUMN[number]] = _double(buf, start, raw, scratch)
    present[row] = bits
    count_span[row, 0] = first
    count_span[row, 1] = n_counts
    return n_counts


@njit(cache=True, nogil=True)
def fill(
    data,  # uint8[B]
    top,  # float64[9]: now, utc_offset_s, the 5 weights, their bits, top bits
    rider_span,  # int64[R, 2]
    rider_values,  # float64[R, 5]
    rider_present,  # int64[R]
    rider_lists,  # int64[R, 3]: stops, carried orders, picked-up names
    stop_span,  # int64[S, 2]
    stop_kind,  # int8[S]: 1 pickup, 0 drop-off, -1 neither
    stop_present,  # int64[S]
    order_span,  # int64[C + O, 2]: carried first, then new
    order_values,  # float64[C + O, 10]
    order_items,  # int64[C + O]
    order_present,  # int64[C + O]
    counts,  # int64[IC]
    count_span,  # int64[C + O, 2]
    picked_span,  # int64[N, 2]
    carried_total,  # C
):
    """Read the message into the columns ``count`` sized; ``OK`` or ``BAD``."""
    # Helpers take the bytes and the scratch word as bare pointers: passing them arrays costs
    # two reference counts a call (atomic for the caller's array), most of the read's time.
    buf = data_pointer(data)
    end = len(data)
    word = np.empty(1, np.float64)
    scratch = data_pointer(word)
    raw = data_pointer(word.view(np.uint8))
    pos = 0
    r = 0
    s = 0
    c = 0
    p = 0
    o = carried_total
    n_counts = 0
    top_bits = np.int64(0)
    while pos < end:
        number, wire, start, stop, pos = _field(buf, pos, end)
        if pos < 0:
            return BAD
        if number == 1 or number == 5:  # now, utc_offset_s
            bit = 0 if number == 1 else 2
            if wire != _I64 or top_bits & (np.int64(1) << bit):
                return BAD
            top_bits |= np.int64(1) << bit
            top[0 if number == 1 else 1] = _double(buf, start, raw, scratch)
        elif number == 2:  # a rider
            if wire != _LEN:
                return BAD
            bits = np.int64(0)
            inner = start
            stops = 0
            carried = 0
            picked = 0
            while inner < stop:
                n2, w2, s2, e2, inner = _field(buf, inner, stop)
                if inner < 0:
                    return BAD
                if n2 < 1 or n2 > 8:
                    continue
                if n2 == 5:  # a stop
                    if w2 != _LEN:
                        return BAD
                    sbits = np.int64(0)
                    at = s2
                    stop_kind[s] = -1
                    while at < e2:
                        n3, w3, s3, e3, at = _field(buf, at, e2)
                        if at < 0:
                            return BAD
                        if n3 == 1 or n3 == 2:
                            if w3 != _LEN or sbits & (np.int64(1) << (n3 - 1)):
                                return BAD
                            sbits |= np.int64(1) << (n3 - 1)
                            if n3 == 1:
                                stop_span[s, 0] = s3
                                stop_span[s, 1] = e3
                            elif _is(buf, s3, e3, _PICKUP):
                                stop_kind[s] = 1
                            elif _is(buf, s3, e3, _DROPOFF):
                                stop_kind[s] = 0
                    stop_present[s] = sbits
                    s += 1
                    stops += 1
                    continue
                if n2 == 6:  # a carried order
                    if w2 != _LEN:
                        return BAD
                    n_counts = _order(
                        buf,
                        s2,
                        e2,
                        c,
                        order_span,
                        order_values,
                        order_items,
                        order_present,
                        counts,
                        count_span,
                        n_counts,
                        raw,
                        scratch,
                    )
                    if n_counts < 0:
                        return BAD
                    c += 1
                    carried += 1
                    continue
                if n2 == 7:  # a picked-up name
                    if w2 != _LEN:
                        return BAD
                    picked_span[p, 0] = s2
                    picked_span[p, 1] = e2
                    p += 1
                    picked += 1
                    continue
                # id 1, position 2, speed 3, capacity 4, available_at 8
                bit = 0 if n2 == 1 else 1 if n2 == 2 else 4 if n2 == 3 else 5 if n2 == 4 else 6
                if bits & (np.int64(1) << bit):
                    return BAD
                bits |= np.int64(1) << bit
                if n2 == 1:
                    if w2 != _LEN:
                        return BAD
                    rider_span[r, 0] = s2
                    rider_span[r, 1] = e2
                elif n2 == 2:
                    if w2 != _LEN:
                        return BAD
                    lat, lng, has_lat, has_lng, ok = _position(buf, s2, e2, raw, scratch)
                    if not ok:
                        return BAD
                    rider_values[r, 0] = lat
                    rider_values[r, 1] = lng
                    if has_lat:
                        bits |= np.int64(1) << 2
                    if has_lng:
                        bits |= np.int64(1) << 3
                else:
                    if w2 != _I64:
                        return BAD
                    column = 2 if n2 == 3 else 3 if n2 == 4 else 4
                    rider_values[r, column] = _double(buf, s2, raw, scratch)
            rider_present[r] = bits
            rider_lists[r, 0] = stops
            rider_lists[r, 1] = carried
            rider_lists[r, 2] = picked
            r += 1
        elif number == 3:  # a new order
            if wire != _LEN:
                return BAD
            n_counts = _order(
                buf,
                start,
                stop,
                o,
                order_span,
                order_values,
                order_items,
                order_present,
                counts,
                count_span,
                n_counts,
                raw,
                scratch,
            )
            if n_counts < 0:
                return BAD
            o += 1
        elif number == 4:  # weights
            if wire != _LEN or top_bits & 2:
                return BAD
            top_bits |= 2
            wbits = np.int64(0)
            at = start
            while at < stop:
                n3, w3, s3, e3, at = _field(buf, at, stop)
                if at < 0:
                    return BAD
                if n3 < 1 or n3 > 5:
                    continue
                if wbits & (np.int64(1) << (n3 - 1)):
                    return BAD
                wbits |= np.int64(1) << (n3 - 1)
                if n3 <= 2:
                    if w3 != _I64:
                        return BAD
                    top[1 + n3] = _double(buf, s3, raw, scratch)
                else:
                    if w3 != _VARINT:
                        return BAD
                    value, _ = _varint(buf, s3, e3)
                    top[1 + n3] = (value != np.uint64(0)) if n3 == 5 else _int32(value)
            top[7] = wbits
    top[8] = top_bits
    return OK
