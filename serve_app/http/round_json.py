"""A dispatch round's JSON body read straight into the packer's columns: the JSON twin of the
gRPC reader (``grpc_api.round_message``).

msgspec reads a big round's JSON into tens of thousands of wire Structs, and gathering the
riders' columns back out of them costs about as much again (``bench/big_round.py`` times
both). Here one compiled pass (``_round_json_jit.fill``) walks the body as the request's
shape and fills the columns every reader fills (``round_columns.FilledColumns``), sized from
the body itself and the limits; the request's rules are then applied once for every wire
form (``round_columns.round_of``).

It only ever *accepts*: a body it does not take whole (malformed, an unknown or repeated key,
an escape in a string, a number it cannot read exactly, past a limit, a broken rule) gives
None, and the wire Structs and then the model read it (``serve_app.round_decoder``), whose
answer stands. ``tests/serve/test_round_json.py`` holds it to the model's reading.
"""

from __future__ import annotations

import functools

import numpy as np
from pydantic import BaseModel

from serve_app import _round_keys_jit as keys
from serve_app import model_rules
from serve_app.http import _round_json_jit as jit
from serve_app.pipeline.limits import Limits
from serve_app.round_columns import ColumnRound, FilledColumns, round_of


@functools.cache
def _required_keys(model: type[BaseModel]) -> int:
    """The bits of ``TOP_KEYS`` the model requires (a list has no presence bit of its own)."""
    return sum(
        1 << k for k, name in enumerate(keys.TOP_KEYS) if model.model_fields[name].is_required()
    )


@functools.cache
def _most_item_counts(model: type[BaseModel]) -> int:
    """How many item counts an order may list."""
    order = model_rules.item_model(model_rules.field(model, "orders"))
    return model_rules.max_length(model_rules.field(order, "item_counts"))


def read_json_round(body: bytes, model: type[BaseModel], limits: Limits) -> ColumnRound | None:
    """The round in ``body`` (a JSON dispatch request) under ``model``'s rules and
    ``limits``, or None where this reader does not take it whole."""
    buf = np.frombuffer(body, np.uint8)
    objects, strings, elements = jit.capacities(buf).tolist()
    counts_max = _most_item_counts(model)
    per_route = limits.max_riders * limits.max_route_stops
    # Each order holds two position objects, each rider one: a tighter bound on each.
    riders = min(objects // 2, limits.max_riders)
    carried = min(objects // 3, per_route)
    new = min(objects // 3, limits.max_orders)
    filled = FilledColumns.allocate(
        riders,
        min(objects, per_route),
        carried + new,
        min(strings, per_route),
        min(elements, (carried + new) * counts_max),
    )
    got = jit.fill(buf, *filled.arrays(), carried).tolist()
    status, n_riders, n_stops, n_carried, n_new, n_picked, n_counts, keys = got
    required = _required_keys(model)
    if status != jit.OK or keys & required != required:
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
    """Compile the reader (or load it from Numba's on-disk cache) in this process."""
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
    if read_json_round(body.encode(), DispatchRequest, Limits()) is None:
        raise RuntimeError("the JSON round reader refused its own warm-up round")
