"""A gRPC dispatch round (``orml.v1.DispatchRequest``'s bytes) read straight into the packer's
columns: the protobuf twin of the JSON fast path (``serve_app.round_decoder``).

Read the usual way, a 5000-rider round is ~90,000 protobuf messages, each turned into a dict,
then into a wire Struct: about 0.35 s of Python at the edge for a round the solver plans in
0.2 s. Here a compiled pass (``_round_message_jit.count``) counts the lists in the bytes and
holds them to the limits (TooLarge naming the list, before anything is built), a second one
reads the bytes into arrays (every number, a span per string), and the request's rules are
applied over whole columns:

* presence: a field the model requires is set on every element, and an unset optional field
  takes the model's default (proto3 ``optional``: unset is "missing", as in the HTTP body);
* bounds: each number within its field's ``ge``/``le`` and finite (the model refuses
  infinity and NaN), each id's length within ``Id``'s, each stop's kind one of the two;
* then the domain's rules, as for JSON (``obeys_domain_rules``; the new orders and weights as
  domain types, whose own checks run).

Every bound, default and requirement is read from the request model (``model_rules``), never
restated. Like the JSON path this reader only ever *accepts*: anything it does not take whole
returns None and the message is read the usual way, whose answer (the INVALID_ARGUMENT naming
the field) stands. ``tests/serve/test_round_message.py`` holds it to that reading.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from domain import DispatchWeights, OrderColumns
from planner.rider_columns import CARRIED_FIELDS, HEAD_FIELDS, RiderColumns
from serve_app import model_rules
from serve_app.grpc_api import _round_message_jit as jit
from serve_app.pipeline.errors import TooLarge
from serve_app.pipeline.limits import Limits


@dataclass(frozen=True)
class RoundMessage:
    """The columns of one message, the rules applied; ``riders`` as the packer reads them."""

    now: float
    utc_offset_s: float
    riders: RiderColumns
    orders: OrderColumns
    weights: DispatchWeights
    longest_route: int


@dataclass(frozen=True)
class _Rules:
    """What the request model says of each column the reader fills (numbers: [lo, hi] and
    whether required, else its default)."""

    order_required: int
    order_defaults: dict[int, float]  # value column -> default
    order_bounds: np.ndarray  # float64[10, 2] per value column
    items_default: int
    items_bounds: tuple[float, float]
    counts_bounds: tuple[float, float]
    counts_max: int
    rider_required: int
    rider_bounds: np.ndarray  # float64[5, 2]
    stop_required: int
    rider_id_length: tuple[float, float]
    stop_id_length: tuple[float, float]
    order_id_length: tuple[float, float]
    picked_length: tuple[float, float]
    weight_defaults: tuple[Any, ...]
    weight_bounds: tuple[tuple[float, float], ...]
    now_bounds: tuple[float, float]
    now_required: bool
    offset_default: float
    offset_bounds: tuple[float, float]


def _bits(model: type[BaseModel], paths: tuple[str, ...]) -> int:
    """The presence bits of the ``paths`` that ``model`` requires (a path is required when
    every field along it is)."""
    mask = 0
    for k, path in enumerate(paths):
        if all(model_rules.field(model, path[: i or None]).is_required() for i in _prefixes(path)):
            mask |= 1 << k
    return mask


def _prefixes(path: str) -> list[int]:
    """End positions of each dotted prefix of ``path`` (0 for the whole)."""
    return [i for i, ch in enumerate(path) if ch == "."] + [0]


def _bounds(model: type[BaseModel], paths: tuple[str, ...]) -> np.ndarray:
    return np.array([model_rules.bounds(model_rules.field(model, p)) for p in paths], np.float64)


@functools.cache
def _rules(model: type[BaseModel]) -> _Rules:
    rider = model_rules.item_model(model_rules.field(model, "riders"))
    order = model_rules.item_model(model_rules.field(model, "orders"))
    stop = model_rules.item_model(model_rules.field(rider, "route"))
    weights = model_rules.field(model, "weights").annotation
    assert rider and order and stop and isinstance(weights, type)
    counts = model_rules.field(order, "item_counts")
    defaults = {
        k: float(model_rules.field(order, p).default)
        for k, p in enumerate(jit.ORDER_VALUES)
        if not model_rules.field(order, p).is_required()
    }
    return _Rules(
        order_required=_bits(order, jit.ORDER_BITS),
        order_defaults=defaults,
        order_bounds=_bounds(order, jit.ORDER_VALUES),
        items_default=int(model_rules.field(order, "items").default),
        items_bounds=model_rules.bounds(model_rules.field(order, "items")),
        counts_bounds=model_rules.bounds(model_rules.item_field(counts)),
        counts_max=model_rules.max_length(counts),
        rider_required=_bits(rider, jit.RIDER_BITS),
        rider_bounds=_bounds(rider, jit.RIDER_VALUES),
        stop_required=_bits(stop, jit.STOP_BITS),
        rider_id_length=model_rules.lengths(model_rules.field(rider, "id")),
        stop_id_length=model_rules.lengths(model_rules.field(stop, "order_id")),
        order_id_length=model_rules.lengths(model_rules.field(order, "id")),
        picked_length=model_rules.lengths(
            model_rules.item_field(model_rules.field(rider, "picked_up"))
        ),
        weight_defaults=tuple(
            weights.model_fields[n].get_default(call_default_factory=True) for n in jit.WEIGHT_BITS
        ),
        weight_bounds=tuple(model_rules.bounds(weights.model_fields[n]) for n in jit.WEIGHT_BITS),
        now_bounds=model_rules.bounds(model_rules.field(model, "now")),
        now_required=model_rules.field(model, "now").is_required(),
        offset_default=float(model_rules.field(model, "utc_offset_s").default),
        offset_bounds=model_rules.bounds(model_rules.field(model, "utc_offset_s")),
    )


def _within(values: np.ndarray, lo_hi: np.ndarray | tuple[float, float]) -> bool:
    """Every value finite and within its [lo, hi] (the models refuse infinity and NaN)."""
    bounds = np.asarray(lo_hi, np.float64)
    lo, hi = bounds[..., 0], bounds[..., 1]
    return bool((np.isfinite(values) & (values >= lo) & (values <= hi)).all())


def _strings(buf: np.ndarray, spans: np.ndarray, length: tuple[float, float]) -> list[str] | None:
    """The strings at ``spans`` (int64[N, 2]) of ``buf``, or None where one is not UTF-8 or
    its length in characters is outside ``length``.

    Decoded at once, joined by NUL (one ``decode`` for ~50,000 ids, not one each); strings
    that hold a NUL themselves are decoded one by one."""
    if not len(spans):
        return []
    together, ok = jit.joined(buf, spans, 0)
    try:
        if ok:
            got = together.tobytes().decode().split("\0")
        else:
            data = buf.tobytes()
            got = [data[a:b].decode() for a, b in spans.tolist()]
    except UnicodeDecodeError:
        return None
    lo, hi = length
    sizes = list(map(len, got))
    if min(sizes) < lo or max(sizes) > hi:
        return None
    return got


def _has_all(present: np.ndarray, required: int) -> bool:
    return bool(((present & required) == required).all())


def read_round(data: bytes, model: type[BaseModel], limits: Limits) -> RoundMessage | None:
    """The round in ``data`` (a serialized ``DispatchRequest``) under ``model``'s rules, or
    None where it does not take the message whole. Its lists are counted first, in one
    compiled pass over the bytes, and held to ``limits`` before anything is built (TooLarge
    naming the list, as ``wire.check_counts`` does for the parser's path). The domain's rules
    are the caller's (``obeys_domain_rules``), as for JSON."""
    rules = _rules(model)
    buf = np.frombuffer(data, np.uint8)
    counted = jit.count(buf).tolist()
    n_riders, n_stops, n_carried, n_picked, n_new, n_counts, status = counted[:7]
    if status != jit.OK:
        return None
    most_stops, most_carried, most_picked = counted[7:]
    for name, got, limit in (
        ("riders", n_riders, limits.max_riders),
        ("orders", n_new, limits.max_orders),
        ("route stops", most_stops, limits.max_route_stops),
        ("orders on a route", most_carried, limits.max_route_stops),
        ("picked-up orders", most_picked, limits.max_route_stops),
    ):
        if got > limit:
            raise TooLarge(name, got, limit)
    n_orders = n_carried + n_new
    top = np.full(9, math.nan)
    rider_span = np.zeros((n_riders, 2), np.int64)
    head = np.full((n_riders, len(HEAD_FIELDS)), math.nan)
    rider_present = np.zeros(n_riders, np.int64)
    rider_lists = np.zeros((n_riders, 3), np.int64)
    stop_span = np.zeros((n_stops, 2), np.int64)
    stop_kind = np.zeros(n_stops, np.int8)
    stop_present = np.zeros(n_stops, np.int64)
    order_span = np.zeros((n_orders, 2), np.int64)
    values = np.full((n_orders, len(CARRIED_FIELDS)), math.nan)
    items = np.zeros(n_orders, np.int64)
    order_present = np.zeros(n_orders, np.int64)
    counts = np.zeros(n_counts, np.int64)
    count_span = np.zeros((n_orders, 2), np.int64)
    picked_span = np.zeros((n_picked, 2), np.int64)
    status = jit.fill(
        buf,
        top,
        rider_span,
        head,
        rider_present,
        rider_lists,
        stop_span,
        stop_kind,
        stop_present,
        order_span,
        values,
        items,
        order_present,
        counts,
        count_span,
        picked_span,
        n_carried,
    )
    if status != jit.OK:
        return None
    # Presence, then defaults where the model has them.
    if not (
        _has_all(order_present, rules.order_required)
        and _has_all(rider_present, rules.rider_required)
        and _has_all(stop_present, rules.stop_required)
        and (stop_kind >= 0).all()
    ):
        return None
    top_bits = int(top[8])
    if rules.now_required and not top_bits & 1:
        return None
    for column, default in rules.order_defaults.items():
        bit = 1 << jit.ORDER_BITS.index(jit.ORDER_VALUES[column])
        values[(order_present & bit) == 0, column] = default
    items[(order_present & (1 << jit.ORDER_BITS.index("items"))) == 0] = rules.items_default
    available_given = (rider_present & (1 << jit.RIDER_BITS.index("available_at"))) != 0
    head[~available_given, len(HEAD_FIELDS) - 1] = 0.0  # checked as none given, NaN below
    # Bounds.
    lengths = count_span[:, 1] - count_span[:, 0]
    if not (
        _within(values, rules.order_bounds)
        and _within(head, rules.rider_bounds)
        and _within(items, rules.items_bounds)
        and _within(counts, rules.counts_bounds)
        and (lengths <= rules.counts_max).all()
    ):
        return None
    head[~available_given, len(HEAD_FIELDS) - 1] = math.nan
    now = float(top[0])
    utc_offset_s = float(top[1]) if top_bits & 4 else rules.offset_default
    if not (
        _within(np.array([now]), rules.now_bounds)
        and _within(np.array([utc_offset_s]), rules.offset_bounds)
    ):
        return None
    weights = _weights(top, rules)
    if weights is None:
        return None
    # Strings: ids and names.
    rider_ids = _strings(buf, rider_span, rules.rider_id_length)
    stop_ids = _strings(buf, stop_span, rules.stop_id_length)
    order_ids = _strings(buf, order_span, rules.order_id_length)
    picked = _strings(buf, picked_span, rules.picked_length)
    if rider_ids is None or stop_ids is None or order_ids is None or picked is None:
        return None
    carried_ids = order_ids[:n_carried]
    row_of = dict(zip(carried_ids, range(n_carried), strict=True))
    rider_rows = np.arange(n_riders, dtype=np.int64)
    columns = RiderColumns(
        ids=rider_ids,
        head=head,
        available_given=available_given,
        route_len=rider_lists[:, 0].copy(),
        stop_ids=stop_ids,
        stop_pickup=stop_kind == 1,
        stop_rows=np.array([row_of.get(i, -1) for i in stop_ids], np.int64).reshape(n_stops),
        carried_ids=carried_ids,
        carried_rider=np.repeat(rider_rows, rider_lists[:, 1]),
        carried=values[:n_carried],
        picked_rows=np.array([row_of.get(i, -1) for i in picked], np.int64).reshape(n_picked),
        picked_by=np.repeat(rider_rows, rider_lists[:, 2]),
    )
    new = _new_orders(
        order_ids[n_carried:], values[n_carried:], items[n_carried:], counts, count_span[n_carried:]
    )
    if new is None:
        return None
    longest = int(rider_lists[:, 0].max()) if n_riders else 0
    return RoundMessage(now, utc_offset_s, columns, new, weights, longest)


def _weights(top: np.ndarray, rules: _Rules) -> DispatchWeights | None:
    given_weights = int(top[8]) & 2
    bits = int(top[7]) if given_weights else 0
    got = []
    for k, (default, (lo, hi)) in enumerate(
        zip(rules.weight_defaults, rules.weight_bounds, strict=True)
    ):
        if not bits & (1 << k):
            got.append(default)
            continue
        value = top[2 + k]
        if not (math.isfinite(value) and lo <= value <= hi):
            return None
        got.append(value)
    late_weight, max_lateness_s, max_orders, candidates, etr_floor = got
    try:
        return DispatchWeights(
            late_weight=float(late_weight),
            max_lateness_s=float(max_lateness_s),
            max_orders_per_rider=int(max_orders),
            candidate_riders=None if candidates is None else int(candidates),
            etr_floor=bool(etr_floor),
        )
    except ValueError:
        return None


def _new_orders(
    ids: list[str], values: np.ndarray, items: np.ndarray, counts: np.ndarray, spans: np.ndarray
) -> OrderColumns | None:
    """The new orders as columns, held to ``Order``'s rules over them; None where one
    breaks them. spans : int64[O, 2], each order's item counts in ``counts``."""
    lengths = spans[:, 1] - spans[:, 0]
    start = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(lengths, out=start[1:])
    # Each order's counts, gathered from wherever the message put them, one after another.
    at = np.repeat(spans[:, 0] - start[:-1], lengths) + np.arange(int(start[-1]))
    orders = OrderColumns(ids, values, items, start, counts[at])
    return orders if orders.obeys_rules() else None


def warm_up() -> None:
    """Compile the reader (or load it from Numba's on-disk cache) in this process: every
    compiled function, on a round with one of each thing it reads."""
    from serve_app.grpc_api import orml_pb2 as pb
    from serve_app.schemas import DispatchRequest

    def order(name: str) -> pb.Order:
        here = pb.Position(lat=1.0, lng=1.0)
        return pb.Order(
            id=name,
            pickup=here,
            dropoff=here,
            created_at=1.0,
            ready_at=1.0,
            promised_at=2.0,
            item_counts=[1],
        )

    rider = pb.Rider(
        id="r",
        position=pb.Position(lat=1.0, lng=1.0),
        speed_mps=1.0,
        capacity=2.0,
        route=[pb.Stop(order_id="a", kind="dropoff")],
        orders=[order("a")],
        picked_up=["a"],
    )
    message = pb.DispatchRequest(now=1.0, riders=[rider], orders=[order("b")])
    if read_round(message.SerializeToString(), DispatchRequest, Limits()) is None:
        raise RuntimeError("the round reader refused its own warm-up round")
