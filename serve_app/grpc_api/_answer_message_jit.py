"""The compiled writer of a dispatch answer's big fields (``answer_message`` is its caller and
holds the field numbers to ``orml.proto``'s ``DispatchResponse``).

Protobuf's wire format, written directly: each string a length and its UTF-8 bytes (from one
buffer of them all and their offsets), each double its 8 little-endian bytes, each message its
length first. Sizes are computed before anything is written, so the output is allocated once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_PICKUP = np.frombuffer(b"pickup", np.uint8)
_DROPOFF = np.frombuffer(b"dropoff", np.uint8)
# Tags: (field number << 3) | wire type (2: length-delimited, 1: 64-bit).
_LEN_1, _LEN_2, _LEN_3 = 0x0A, 0x12, 0x1A
_DOUBLE_1, _DOUBLE_2, _DOUBLE_3 = 0x09, 0x11, 0x19


@njit(cache=True, nogil=True)
def _varint_size(value):
    size = 1
    while value >= 128:
        value >>= 7
        size += 1
    return size


@njit(cache=True, nogil=True)
def _put_varint(out, pos, value):
    while value >= 128:
        out[pos] = (value & 127) | 128
        value >>= 7
        pos += 1
    out[pos] = value
    return pos + 1


@njit(cache=True, nogil=True)
def _string_size(length):
    """A length-delimited field of ``length`` bytes, its tag included."""
    return 1 + _varint_size(length) + length


@njit(cache=True, nogil=True)
def _put_string(out, pos, tag, data, start, stop):
    out[pos] = tag
    pos = _put_varint(out, pos + 1, stop - start)
    out[pos : pos + stop - start] = data[start:stop]
    return pos + stop - start


@njit(cache=True, nogil=True)
def _put_double(out, pos, tag, value, scratch, raw):
    out[pos] = tag
    scratch[0] = value
    out[pos + 1 : pos + 9] = raw
    return pos + 9


@njit(cache=True, nogil=True)
def write(
    assigned,  # (order id bytes, offsets int64[A + 1], rider id bytes, offsets, cost float64[A])
    routes,  # (rider id bytes, offsets int64[K + 1], starts int64[K + 1], stop id bytes,
    #           offsets int64[S + 1], pickup bool[S])
    arrivals,  # (order id bytes, offsets int64[N + 1], planned float64[N], etr float64[N],
    #             has_etr bool[N])
):
    """uint8[...]: fields 1 (assignments), 2 (routes) and 3 (arrivals) of a
    ``DispatchResponse``, serialized."""
    a_ids, a_at, r_ids, r_at, cost = assigned
    k_ids, k_at, starts, s_ids, s_at, pickup = routes
    n_ids, n_at, planned, etr, has_etr = arrivals
    n_assigned, n_riders, n_arrivals = len(cost), len(k_at) - 1, len(planned)
    # Sizes first: every nested message's length precedes it.
    assignment = np.empty(n_assigned, np.int64)
    route = np.empty(n_riders, np.int64)
    entry = np.empty(n_riders, np.int64)
    arrival = np.empty(n_arrivals, np.int64)
    total = 0
    for i in range(n_assigned):
        size = _string_size(a_at[i + 1] - a_at[i]) + _string_size(r_at[i + 1] - r_at[i]) + 9
        assignment[i] = size
        total += 1 + _varint_size(size) + size
    for k in range(n_riders):
        stops = 0
        for s in range(starts[k], starts[k + 1]):
            stop = _string_size(s_at[s + 1] - s_at[s]) + _string_size(6 if pickup[s] else 7)
            stops += 1 + _varint_size(stop) + stop
        route[k] = stops
        size = _string_size(k_at[k + 1] - k_at[k]) + 1 + _varint_size(stops) + stops
        entry[k] = size
        total += 1 + _varint_size(size) + size
    for i in range(n_arrivals):
        value = 9 + (9 if has_etr[i] else 0)
        size = _string_size(n_at[i + 1] - n_at[i]) + 1 + _varint_size(value) + value
        arrival[i] = size
        total += 1 + _varint_size(size) + size
    out = np.empty(total, np.uint8)
    scratch = np.empty(1, np.float64)
    raw = scratch.view(np.uint8)
    pos = 0
    for i in range(n_assigned):
        out[pos] = _LEN_1
        pos = _put_varint(out, pos + 1, assignment[i])
        pos = _put_string(out, pos, _LEN_1, a_ids, a_at[i], a_at[i + 1])
        pos = _put_string(out, pos, _LEN_2, r_ids, r_at[i], r_at[i + 1])
        pos = _put_double(out, pos, _DOUBLE_3, cost[i], scratch, raw)
    for k in range(n_riders):
        out[pos] = _LEN_2
        pos = _put_varint(out, pos + 1, entry[k])
        pos = _put_string(out, pos, _LEN_1, k_ids, k_at[k], k_at[k + 1])
        out[pos] = _LEN_2
        pos = _put_varint(out, pos + 1, route[k])
        for s in range(starts[k], starts[k + 1]):
            kind = _PICKUP if pickup[s] else _DROPOFF
            stop = _string_size(s_at[s + 1] - s_at[s]) + _string_size(len(kind))
            out[pos] = _LEN_1
            pos = _put_varint(out, pos + 1, stop)
            pos = _put_string(out, pos, _LEN_1, s_ids, s_at[s], s_at[s + 1])
            pos = _put_string(out, pos, _LEN_2, kind, 0, len(kind))
    for i in range(n_arrivals):
        out[pos] = _LEN_3
        pos = _put_varint(out, pos + 1, arrival[i])
        pos = _put_string(out, pos, _LEN_1, n_ids, n_at[i], n_at[i + 1])
        out[pos] = _LEN_2
        pos = _put_varint(out, pos + 1, 9 + (9 if has_etr[i] else 0))
        pos = _put_double(out, pos, _DOUBLE_1, planned[i], scratch, raw)
        if has_etr[i]:
            pos = _put_double(out, pos, _DOUBLE_2, etr[i], scratch, raw)
    return out
