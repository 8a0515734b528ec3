"""A dispatch round's body, JSON or msgpack, read straight into the packer's columns: the twin
of the gRPC reader (``grpc_api.round_message``).

msgspec reads a big round's body into tens of thousands of wire Structs, and gathering the
riders' columns back out of them costs about as much again (``bench/big_round.py`` times
both). Here one compiled pass (``_round_walk_jit.fill``, reading each token with its form's
functions) walks the body as the request's shape and fills the columns every reader fills
(``round_columns.FilledColumns``), sized from the body itself and capped by the limits; the
request's rules are then applied once for every wire form (``round_columns.round_of``).

It only ever *accepts*, or answers the model's 413: a body it does not take whole
(malformed, an unknown or repeated key, an escape in a JSON string, a number it cannot read
exactly, a broken rule) gives None, and the wire Structs and then the model read it
(``serve_app.round_decoder``), whose answer stands. A list past its limit is counted to its
end without being kept (``_round_walk_jit._skip_value``), and where everything the model reads
before that limit is valid, the model's answer is that 413 (the model stops a list at its
first element in error or past its limit, and reports the first list past its limit): raised
here in milliseconds rather than by the model after seconds of validation.
``tests/serve/test_round_body.py`` holds it to the model's reading and the model's 413.
"""

from __future__ import annotations

import functools

import numpy as np
from pydantic import BaseModel

from domain.order_columns import CREATED, PROMISED
from serve_app import _round_keys_jit as keys
from serve_app.http import _json_tokens_jit, _round_walk_jit, codec
from serve_app.pipeline.errors import TooLarge
from serve_app.pipeline.limits import Limits
from serve_app.round_columns import ColumnRound, FilledColumns, round_of, rules_of


@functools.cache
def _required_keys(model: type[BaseModel]) -> int:
    """The bits of ``TOP_KEYS`` the model requires (a list has no presence bit of its own)."""
    return sum(
        1 << k for k, name in enumerate(keys.TOP_KEYS) if model.model_fields[name].is_required()
    )


#: Fewest bytes a msgpack rider, order, stop takes with the fields the model requires
#: (their keys' names included): bounds on how many a body holds. A body past one is only
#: left to the slower readers.
_MSGPACK_RIDER, _MSGPACK_ORDER, _MSGPACK_STOP = 40, 64, 20


def _capacities(buf: np.ndarray, media: str) -> tuple[int, int, int, int, int]:
    """Upper bounds on (riders, orders, stops, picked-up names, item counts) in a body."""
    if media == codec.JSON:
        # Each object opens a brace (each order holds two positions, each rider one), each
        # string two quotes, each list element follows a comma or a bracket.
        objects, strings, elements = _json_tokens_jit.capacities(buf).tolist()
        return objects // 2, objects // 3, objects, strings, elements
    size = len(buf)
    return (size // _MSGPACK_RIDER, size // _MSGPACK_ORDER, size // _MSGPACK_STOP, size // 2, size)


def read_body_round(
    body: bytes, media: str, model: type[BaseModel], limits: Limits
) -> ColumnRound | None:
    """The round in ``body`` (a dispatch request in ``media``: ``codec.JSON`` or
    ``codec.MSGPACK``) under ``model``'s rules and ``limits``, or None where this reader
    does not take it whole. Raises TooLarge, the model's 413, for a round past a limit whose
    every part the model reads before that limit keeps its rules."""
    buf = np.frombuffer(body, np.uint8)
    riders_at_most, orders_at_most, stops_at_most, names_at_most, counts_at_most = _capacities(
        buf, media
    )
    per_route = limits.max_riders * limits.max_route_stops
    carried = min(orders_at_most, per_route)
    new = min(orders_at_most, limits.max_orders)
    filled = FilledColumns.allocate(
        min(riders_at_most, limits.max_riders),
        min(stops_at_most, per_route),
        carried + new,
        min(names_at_most, per_route),
        min(counts_at_most, (carried + new) * rules_of(model).counts_max),
    )
    form = _round_walk_jit.JSON if media == codec.JSON else _round_walk_jit.MSGPACK
    got = _round_walk_jit.fill(buf, *filled.arrays(), carried, form).tolist()
    status, listed_riders, n_stops, n_carried, listed_new, n_picked, n_counts, given = got
    required = _required_keys(model)
    if status != _round_walk_jit.OK or given & required != required:
        return None
    n_riders = min(listed_riders, len(filled.rider_span))
    n_new = min(listed_new, new)
    lists = filled.rider_lists[:n_riders]
    too_large = _past_the_limits(lists, listed_riders, listed_new, limits)
    if too_large is None and (n_riders, n_new) != (listed_riders, listed_new):
        return None  # not a limit's doing: the body outgrew a bound taken from its bytes
    rows = np.concatenate([np.arange(n_carried), carried + np.arange(n_new)])
    f = filled
    compact = FilledColumns(
        top=f.top,
        rider_span=f.rider_span[:n_riders],
        head=f.head[:n_riders],
        rider_present=f.rider_present[:n_riders],
        rider_lists=lists,
        stop_span=f.stop_span[:n_stops],
        stop_kind=f.stop_kind[:n_stops],
        stop_present=f.stop_present[:n_stops],
        order_span=f.order_span[rows],
        values=f.values[rows],
        items=f.items[rows],
        order_present=f.order_present[rows],
        counts=f.counts[:n_counts],
        count_span=f.count_span[rows],
        picked_span=f.picked_span[:n_picked],
    )
    got_round = round_of(buf, compact, n_carried, model)
    if too_large is None or got_round is None:
        return got_round
    # Past a limit, with all the model reads before that limit kept: the model's answer
    # is this 413 (its lists stop at the first element in error, and at the first past the
    # limit), the one rule it states over two fields included.
    promised = compact.values[:n_carried, PROMISED] >= compact.values[:n_carried, CREATED]
    if promised.all() and not (media == codec.MSGPACK and codec.msgpack_is_counted(body)):
        raise too_large
    return None


#: The lists a rider holds (``FilledColumns.rider_lists``' columns), as a 413 names each, in
#: the model's order of fields.
_RIDER_LISTS = ("route stops", "orders on a route", "picked-up orders")


def _past_the_limits(lists: np.ndarray, riders: int, new: int, limits: Limits) -> TooLarge | None:
    """The 413 the model gives a round whose lists are these, where it gives one: the first
    list past its limit in the order the model validates them (each kept rider's own lists,
    in field order, then the riders, then the new orders).
    lists : int64[R, 3], the kept riders' ``_RIDER_LISTS`` lengths."""
    over = lists > limits.max_route_stops
    if over.any():
        rider, which = divmod(int(np.argmax(over.ravel())), lists.shape[1])
        return TooLarge(_RIDER_LISTS[which], int(lists[rider, which]), limits.max_route_stops)
    if riders > limits.max_riders:
        return TooLarge("riders", riders, limits.max_riders)
    if new > limits.max_orders:
        return TooLarge("orders", new, limits.max_orders)
    return None


def warm_up() -> None:
    """Compile both readers (or load them from Numba's on-disk cache) in this process."""
    import json

    import msgpack

    from serve_app.schemas import DispatchRequest

    order = (
        '{"id":"a","pickup":{"lat":1,"lng":1.5},"dropoff":{"lat":1,"lng":1},'
        '"created_at":1,"ready_at":1,"promised_at":2.5e0,"items":1,"item_counts":[1]}'
    )
    body = (
        '{"now":1,"riders":[{"id":"r","position":{"lat":1,"lng":1},"speed_mps":1,'
        '"capacity":2,"route":[{"order_id":"a","kind":"dropoff"}],"orders":[' + order + "],"
        '"picked_up":["a"],"available_at":null}],"orders":[' + order.replace('"a"', '"b"') + "],"
        '"weights":{"late_weight":1,"max_orders_per_rider":3,"candidate_riders":null,'
        '"etr_floor":true},"utc_offset_s":0}'
    )
    for raw, media in (
        (body.encode(), codec.JSON),
        (msgpack.packb(json.loads(body)), codec.MSGPACK),
    ):
        if read_body_round(raw, media, DispatchRequest, Limits()) is None:
            raise RuntimeError(f"the {media} round reader refused its own warm-up round")
