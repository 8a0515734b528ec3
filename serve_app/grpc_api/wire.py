"""Counting a request's repeated fields on the wire, before it is parsed.

Protobuf's parser builds every sub-message it reads: empty sub-messages (two bytes each) parse
into dozens of times their bytes (``bench/hostile.py``), whatever the limits say about how
many may be there. So the lists the limits bound are counted in the serialized
bytes first, stopping at the first element past a limit:

* the top level field by field (a round's riders and orders, an ETR call's orders, a solve's
  tasks: at most a few thousand fields before a limit is passed);
* inside each rider, the route, its orders and the picked-up ids are bounded first by
  counting their tag bytes (``bytes.count``, C speed; a byte of other data that equals a tag
  only raises the count), and walked field by field only when that bound passes a limit.

Bytes that are not a well-formed message stop the count: the parser then refuses them.
"""

from __future__ import annotations

from serve_app.config import Limits
from serve_app.pipeline.errors import TooLarge

_LENGTH_DELIMITED = 2


class _Malformed(Exception):
    pass


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value, shift = 0, 0
    while pos < end:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            break
    raise _Malformed


def _fields(data: bytes, pos: int, end: int):
    """(field number, wire type, payload start, payload end) of each field in data[pos:end]."""
    while pos < end:
        key, pos = _varint(data, pos, end)
        number, wire = key >> 3, key & 7
        start = pos
        if wire == 0:
            _, pos = _varint(data, pos, end)
        elif wire == 1:
            pos += 8
        elif wire == _LENGTH_DELIMITED:
            length, start = _varint(data, pos, end)
            pos = start + length
        elif wire == 5:
            pos += 4
        else:
            raise _Malformed
        if pos > end:
            raise _Malformed
        yield number, wire, start, pos


def _tag(number: int) -> int:
    return (number << 3) | _LENGTH_DELIMITED


#: Per endpoint: the top-level repeated fields (number -> (name, Limits field)), and for the
#: rider field of a dispatch round the repeated fields inside it.
_TOP = {
    "dispatch": {2: ("riders", "max_riders"), 3: ("orders", "max_orders")},
    "etr": {1: ("orders", "max_orders")},
    "solve": {4: ("tasks", "max_tasks")},
}
_RIDER_FIELD = 2
_IN_RIDER = {
    5: ("route stops", "max_route_stops"),
    6: ("orders on a route", "max_route_stops"),
    7: ("picked-up orders", "max_route_stops"),
}


def check_counts(data: bytes, endpoint: str, limits: Limits) -> None:
    """Raise TooLarge for the first bounded list of the serialized request ``data`` of
    ``endpoint`` ("dispatch", "etr", "solve") that is longer than ``limits`` allow."""
    top = _TOP.get(endpoint, {})
    counts = dict.fromkeys(top, 0)
    try:
        for number, wire, start, end in _fields(data, 0, len(data)):
            if number not in top or wire != _LENGTH_DELIMITED:
                continue
            counts[number] += 1
            name, limit = top[number]
            if counts[number] > getattr(limits, limit):  # counted no further: got = limit + 1
                raise TooLarge(name, counts[number], getattr(limits, limit))
            if endpoint == "dispatch" and number == _RIDER_FIELD:
                _check_rider(data, start, end, limits)
    except _Malformed:
        return


def _check_rider(data: bytes, start: int, end: int, limits: Limits) -> None:
    bounds = {n: getattr(limits, limit) for n, (_, limit) in _IN_RIDER.items()}
    if all(data.count(_tag(n), start, end) <= b for n, b in bounds.items()):
        return
    counts = dict.fromkeys(_IN_RIDER, 0)
    for number, wire, _, _ in _fields(data, start, end):
        if number in counts and wire == _LENGTH_DELIMITED:
            counts[number] += 1
            if counts[number] > bounds[number]:
                raise TooLarge(_IN_RIDER[number][0], counts[number], bounds[number])
