"""A dispatch round's body, JSON or msgpack, read straight into the packer's columns: the twin
of the gRPC reader (``grpc_api.round_message``).

msgspec reads a big round's body into tens of thousands of wire Structs, and gathering the
riders' columns back out of them costs about as much again (``bench/big_round.py`` times
both). Here one compiled pass (``_round_walk_jit.fill``, reading each token with its form's
functions) walks the body as the request's shape and fills the columns every reader fills
(``round_columns.FilledColumns``), sized from the body itself and capped by the limits; the
request's rules are then applied once for every wire form (``round_columns.round_of``).

It only ever *accepts*: a body it does not take whole (malformed, an unknown or repeated key,
an escape in a JSON string, a number it cannot read exactly, past a limit, a broken rule)
gives None, and the wire Structs and then the model read it (``serve_app.round_decoder``),
whose answer stands. ``tests/serve/test_round_body.py`` holds it to the model's reading.
"""

from __future__ import annotations

import functools

import numpy as np
from pydantic import BaseModel

from serve_app import _round_keys_jit as keys
from serve_app.http import _json_tokens_jit, _round_walk_jit, codec
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
    does not take it whole."""
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
    status, n_riders, n_stops, n_carried, n_new, n_picked, n_counts, given = got
    required = _required_keys(model)
    if status != _round_walk_jit.OK or given & required != required:
        return None
    lists = filled.rider_lists[:n_riders]
    if n_riders and int(lists.max()) > limits.max_route_stops:
        return None
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
    return round_of(buf, compact, n_carried, model)


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
