"""The compiled assembly of a dispatch answer's big fields as JSON (``answer_json`` is its caller).

It writes no value itself: every string and number comes as its span in an array orjson
encoded (``elements`` finds them), so each is exactly the text orjson writes for it; this pass
lays them out with the keys, braces and commas of ``plan_to_dict``'s shape.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_QUOTE, _BACKSLASH, _COMMA = 34, 92, 44


def _text(value: str) -> np.ndarray:
    return np.frombuffer(value.encode(), np.uint8).copy()


_ASSIGNMENT_OPEN = _text('{"order_id":')
_RIDER = _text(',"rider_id":')
_COST = _text(',"cost":')
_STOP_OPEN = _text('{"order_id":')
_PICKUP = _text(',"kind":"pickup"}')
_DROPOFF = _text(',"kind":"dropoff"}')
_PLANNED = _text(':{"planned_s":')
_NOTHING = _text("")
_ETR = _text(',"etr_s":')


@njit(cache=True, nogil=True)
def _split(data, spans):
    """How many elements the JSON array ``data`` holds (as orjson writes one: no whitespace;
    commas inside strings skipped), and their (start, end) in ``spans`` where it has room."""
    if len(data) <= 2:
        return 0
    at = 0
    start = 1
    inside = False
    k = 1
    while k < len(data) - 1:
        byte = data[k]
        if inside:
            if byte == _BACKSLASH:
                k += 1
            elif byte == _QUOTE:
                inside = False
        elif byte == _QUOTE:
            inside = True
        elif byte == _COMMA:
            if at < len(spans):
                spans[at, 0], spans[at, 1] = start, k
            at += 1
            start = k + 1
        k += 1
    if at < len(spans):
        spans[at, 0], spans[at, 1] = start, len(data) - 1
    return at + 1


@njit(cache=True, nogil=True)
def elements(data):
    """int64[N, 2]: the (start, end) of each element of the JSON array ``data``."""
    spans = np.empty((_split(data, np.empty((0, 2), np.int64)), 2), np.int64)
    _split(data, spans)
    return spans


@njit(cache=True, nogil=True)
def _put(out, pos, data, start, stop):
    out[pos : pos + stop - start] = data[start:stop]
    return pos + stop - start


@njit(cache=True, nogil=True)
def _put_all(out, pos, text):
    out[pos : pos + len(text)] = text
    return pos + len(text)


@njit(cache=True, nogil=True)
def _triples(opening, closing, first, one, one_at, second, two, two_at, third, three, three_at):
    """``opening``, then per element ``first`` one ``second`` two ``third`` three ``}`` (each
    of one, two, three the element's span in that array), commas between, then ``closing``."""
    n = len(one_at)
    size = 2 + n * (len(first) + len(second) + len(third) + 2)
    for i in range(n):
        size += one_at[i, 1] - one_at[i, 0] + two_at[i, 1] - two_at[i, 0]
        size += three_at[i, 1] - three_at[i, 0]
    out = np.empty(size, np.uint8)
    out[0] = opening
    pos = 1
    for i in range(n):
        if i:
            out[pos] = _COMMA
            pos += 1
        pos = _put_all(out, pos, first)
        pos = _put(out, pos, one, one_at[i, 0], one_at[i, 1])
        pos = _put_all(out, pos, second)
        pos = _put(out, pos, two, two_at[i, 0], two_at[i, 1])
        pos = _put_all(out, pos, third)
        pos = _put(out, pos, three, three_at[i, 0], three_at[i, 1])
        out[pos] = 125  # }
        pos += 1
    out[pos] = closing
    return out[: pos + 1]


@njit(cache=True, nogil=True)
def write(assigned, routes, arrivals):
    """The JSON text of ``"assignments"``' list, ``"routes"``' object and ``"arrivals"``'
    object, as three uint8 arrays (each a value: ``[...]``, ``{...}``, ``{...}``).

    assigned : (order ids, rider ids, costs): each an orjson array and its element spans.
    routes : (rider ids, spans, starts int64[K + 1], stop ids, spans, pickup bool[S]).
    arrivals : (order ids, spans, planned, spans, etr (numbers or null), spans)."""
    o_data, o_at, r_data, r_at, c_data, c_at = assigned
    k_data, k_at, starts, s_data, s_at, pickup = routes
    n_data, n_at, p_data, p_at, e_data, e_at = arrivals
    n_riders = len(starts) - 1
    one = _triples(
        91, 93, _ASSIGNMENT_OPEN, o_data, o_at, _RIDER, r_data, r_at, _COST, c_data, c_at
    )  # [...]
    size = 2
    for k in range(n_riders):
        size += k_at[k, 1] - k_at[k, 0] + 4
        for s in range(starts[k], starts[k + 1]):
            size += len(_STOP_OPEN) + len(_DROPOFF) + 1 + s_at[s, 1] - s_at[s, 0]
    two = np.empty(size, np.uint8)
    pos = 0
    two[pos] = 123  # {
    pos += 1
    for k in range(n_riders):
        if k:
            two[pos] = _COMMA
            pos += 1
        pos = _put(two, pos, k_data, k_at[k, 0], k_at[k, 1])
        two[pos] = 58  # :
        two[pos + 1] = 91  # [
        pos += 2
        for s in range(starts[k], starts[k + 1]):
            if s > starts[k]:
                two[pos] = _COMMA
                pos += 1
            pos = _put_all(two, pos, _STOP_OPEN)
            pos = _put(two, pos, s_data, s_at[s, 0], s_at[s, 1])
            pos = _put_all(two, pos, _PICKUP if pickup[s] else _DROPOFF)
        two[pos] = 93  # ]
        pos += 1
    two[pos] = 125  # }
    pos += 1
    two = two[:pos]
    three = _triples(
        123, 125, _NOTHING, n_data, n_at, _PLANNED, p_data, p_at, _ETR, e_data, e_at
    )  # {...}
    return one, two, three
