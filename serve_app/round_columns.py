"""A dispatch round as a compiled reader leaves it (every number in a column, every string a
span of the request's bytes) and the request's rules applied over those columns, once for
every wire form.

Three readers fill the same columns (``FilledColumns``): the protobuf one
(``grpc_api.round_message``) and the JSON and msgpack ones (``http.round_body``). Then
``round_of`` holds them to the request model:

* presence: a field the model requires is set on every element, and an unset optional field
  takes the model's default;
* bounds: each number within its field's ``ge``/``le`` and finite (the model refuses
  infinity and NaN), each id's length within ``Id``'s, each stop's kind one of the two;
* then the domain's rules for the new orders and the weights (as ``OrderColumns`` and
  ``DispatchWeights``, whose own checks run); the riders' are the caller's
  (``obeys_domain_rules``, when the round is packed), as for every fast path.

Every bound, default and requirement is read from the request model (``model_rules``), never
restated. A reader only ever *accepts*: what it or these rules do not take whole gives None,
and a slower path answers (``tests/serve/test_round_message.py``,
``tests/serve/test_round_body.py``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from domain import DispatchWeights, OrderColumns
from planner.rider_columns import CARRIED_FIELDS, HEAD_FIELDS, RiderColumns, rows_of
from serve_app import _round_columns_jit as jit
from serve_app import model_rules

#: Presence bits of an Order (carried or new), in this order, as dotted paths of the model.
ORDER_BITS = (
    "id",
    "pickup",
    "pickup.lat",
    "pickup.lng",
    "dropoff",
    "dropoff.lat",
    "dropoff.lng",
    "created_at",
    "ready_at",
    "promised_at",
    "size",
    "items",
    "pickup_service_s",
    "dropoff_service_s",
)
#: Columns of an order's float64 row: the planner's ``CARRIED_FIELDS``, as dotted paths.
ORDER_VALUES = tuple(f.replace("_lat", ".lat").replace("_lng", ".lng") for f in CARRIED_FIELDS)
RIDER_BITS = (
    "id",
    "position",
    "position.lat",
    "position.lng",
    "speed_mps",
    "capacity",
    "available_at",
)
#: Columns of a rider's float64 row: the planner's ``HEAD_FIELDS`` order.
RIDER_VALUES = ("position.lat", "position.lng", "speed_mps", "capacity", "available_at")
STOP_BITS = ("order_id", "kind")
WEIGHT_BITS = (
    "late_weight",
    "max_lateness_s",
    "max_orders_per_rider",
    "candidate_riders",
    "etr_floor",
)
TOP_BITS = ("now", "weights", "utc_offset_s")
#: ``FilledColumns.top``: now, utc_offset_s, the weights' values (``WEIGHT_BITS``), the
#: weights' presence bits, the round's (``TOP_BITS``).
TOP_NOW, TOP_OFFSET, TOP_WEIGHTS, TOP_WEIGHT_BITS, TOP_PRESENT = 0, 1, 2, 7, 8
#: ``FilledColumns.stop_kind``.
KIND_PICKUP, KIND_DROPOFF, KIND_NEITHER = 1, 0, -1


@dataclass(frozen=True)
class FilledColumns:
    """What a reader fills: R riders, S stops, C carried then O new orders (one row each), N
    picked-up names, IC item counts. Spans are (start, end) in the request's bytes; presence
    is a bit per ``*_BITS`` entry."""

    top: np.ndarray  # float64[9]: see TOP_*
    rider_span: np.ndarray  # int64[R, 2]
    head: np.ndarray  # float64[R, 5]: RIDER_VALUES
    rider_present: np.ndarray  # int64[R]
    rider_lists: np.ndarray  # int64[R, 3]: stops, carried orders, picked-up names
    stop_span: np.ndarray  # int64[S, 2]
    stop_kind: np.ndarray  # int8[S]: KIND_*
    stop_present: np.ndarray  # int64[S]
    order_span: np.ndarray  # int64[C + O, 2]
    values: np.ndarray  # float64[C + O, 10]: ORDER_VALUES
    items: np.ndarray  # int64[C + O]
    order_present: np.ndarray  # int64[C + O]
    counts: np.ndarray  # int64[IC]
    count_span: np.ndarray  # int64[C + O, 2]: each order's item counts in ``counts``
    picked_span: np.ndarray  # int64[N, 2]

    @staticmethod
    def allocate(
        riders: int, stops: int, orders: int, picked: int, item_counts: int
    ) -> FilledColumns:
        """Columns for that many of each (``orders``: carried and new), unset."""
        return FilledColumns(
            top=np.full(9, math.nan),
            rider_span=np.zeros((riders, 2), np.int64),
            head=np.full((riders, len(HEAD_FIELDS)), math.nan),
            rider_present=np.zeros(riders, np.int64),
            rider_lists=np.zeros((riders, 3), np.int64),
            stop_span=np.zeros((stops, 2), np.int64),
            stop_kind=np.full(stops, KIND_NEITHER, np.int8),
            stop_present=np.zeros(stops, np.int64),
            order_span=np.zeros((orders, 2), np.int64),
            values=np.full((orders, len(CARRIED_FIELDS)), math.nan),
            items=np.zeros(orders, np.int64),
            order_present=np.zeros(orders, np.int64),
            counts=np.zeros(item_counts, np.int64),
            count_span=np.zeros((orders, 2), np.int64),
            picked_span=np.zeros((picked, 2), np.int64),
        )

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The columns in field order: the compiled readers' arguments."""
        return tuple(getattr(self, f) for f in self.__dataclass_fields__)


@dataclass(frozen=True)
class ColumnRound:
    """A round read into columns, the request's rules applied; ``riders`` as the packer
    reads them."""

    now: float
    utc_offset_s: float
    riders: RiderColumns
    orders: OrderColumns
    weights: DispatchWeights
    longest_route: int


@dataclass(frozen=True)
class ColumnRules:
    """What the request model says of each column a reader fills (numbers: [lo, hi] and
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


def item_models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """The round model's parts by name: "rider", "order", "stop", "weights"."""
    rider = model_rules.item_model(model_rules.field(model, "riders"))
    order = model_rules.item_model(model_rules.field(model, "orders"))
    stop = model_rules.item_model(model_rules.field(rider, "route")) if rider else None
    weights = model_rules.field(model, "weights").annotation
    assert rider and order and stop and isinstance(weights, type)
    return {"rider": rider, "order": order, "stop": stop, "weights": weights}


@functools.cache
def rules_of(model: type[BaseModel]) -> ColumnRules:
    """What ``model`` says of the columns (read once per model)."""
    parts = item_models(model)
    rider, order, stop, weights = (parts[k] for k in ("rider", "order", "stop", "weights"))
    counts = model_rules.field(order, "item_counts")
    defaults = {
        k: float(model_rules.field(order, p).default)
        for k, p in enumerate(ORDER_VALUES)
        if not model_rules.field(order, p).is_required()
    }
    return ColumnRules(
        order_required=_bits(order, ORDER_BITS),
        order_defaults=defaults,
        order_bounds=_bounds(order, ORDER_VALUES),
        items_default=int(model_rules.field(order, "items").default),
        items_bounds=model_rules.bounds(model_rules.field(order, "items")),
        counts_bounds=model_rules.bounds(model_rules.item_field(counts)),
        counts_max=model_rules.max_length(counts),
        rider_required=_bits(rider, RIDER_BITS),
        rider_bounds=_bounds(rider, RIDER_VALUES),
        stop_required=_bits(stop, STOP_BITS),
        rider_id_length=model_rules.lengths(model_rules.field(rider, "id")),
        stop_id_length=model_rules.lengths(model_rules.field(stop, "order_id")),
        order_id_length=model_rules.lengths(model_rules.field(order, "id")),
        picked_length=model_rules.lengths(
            model_rules.item_field(model_rules.field(rider, "picked_up"))
        ),
        weight_defaults=tuple(
            weights.model_fields[n].get_default(call_default_factory=True) for n in WEIGHT_BITS
        ),
        weight_bounds=tuple(model_rules.bounds(weights.model_fields[n]) for n in WEIGHT_BITS),
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
    ascii_only = False
    try:
        if ok:
            text = together.tobytes().decode()
            ascii_only = text.isascii()  # CPython keeps this as a flag: no scan
            got = text.split("\0")
        else:
            data = buf.tobytes()
            got = [data[a:b].decode() for a, b in spans.tolist()]
    except UnicodeDecodeError:
        return None
    lo, hi = length
    if ascii_only:  # a string's characters are its bytes: counted over the spans at once
        sizes = spans[:, 1] - spans[:, 0]
        shortest, longest = int(sizes.min()), int(sizes.max())
    else:
        sizes = list(map(len, got))
        shortest, longest = min(sizes), max(sizes)
    if shortest < lo or longest > hi:
        return None
    return got


def _has_all(present: np.ndarray, required: int) -> bool:
    return bool(((present & required) == required).all())


def round_of(
    buf: np.ndarray, filled: FilledColumns, n_carried: int, model: type[BaseModel]
) -> ColumnRound | None:
    """The round a reader filled from ``buf`` (its first ``n_carried`` orders the riders'),
    held to ``model``'s rules; None where it breaks one."""
    rules = rules_of(model)
    f = filled
    values, head, items = f.values, f.head, f.items
    # Presence, then defaults where the model has them.
    if not (
        _has_all(f.order_present, rules.order_required)
        and _has_all(f.rider_present, rules.rider_required)
        and _has_all(f.stop_present, rules.stop_required)
        and (f.stop_kind != KIND_NEITHER).all()
    ):
        return None
    top_bits = int(f.top[TOP_PRESENT])
    if rules.now_required and not top_bits & 1:
        return None
    for column, default in rules.order_defaults.items():
        bit = 1 << ORDER_BITS.index(ORDER_VALUES[column])
        values[(f.order_present & bit) == 0, column] = default
    items[(f.order_present & (1 << ORDER_BITS.index("items"))) == 0] = rules.items_default
    available_given = (f.rider_present & (1 << RIDER_BITS.index("available_at"))) != 0
    head[~available_given, len(HEAD_FIELDS) - 1] = 0.0  # checked as none given, NaN below
    # Bounds.
    lengths = f.count_span[:, 1] - f.count_span[:, 0]
    if not (
        _within(values, rules.order_bounds)
        and _within(head, rules.rider_bounds)
        and _within(items, rules.items_bounds)
        and _within(f.counts, rules.counts_bounds)
        and (lengths <= rules.counts_max).all()
    ):
        return None
    head[~available_given, len(HEAD_FIELDS) - 1] = math.nan
    now = float(f.top[TOP_NOW])
    utc_offset_s = float(f.top[TOP_OFFSET]) if top_bits & 4 else rules.offset_default
    if not (
        _within(np.array([now]), rules.now_bounds)
        and _within(np.array([utc_offset_s]), rules.offset_bounds)
    ):
        return None
    weights = _weights(f.top, rules)
    if weights is None:
        return None
    # Strings: ids and names.
    rider_ids = _strings(buf, f.rider_span, rules.rider_id_length)
    stop_ids = _strings(buf, f.stop_span, rules.stop_id_length)
    order_ids = _strings(buf, f.order_span, rules.order_id_length)
    picked = _strings(buf, f.picked_span, rules.picked_length)
    if rider_ids is None or stop_ids is None or order_ids is None or picked is None:
        return None
    n_riders = len(rider_ids)
    carried_ids = order_ids[:n_carried]
    row_of = dict(zip(carried_ids, range(n_carried), strict=True))
    rider_rows = np.arange(n_riders, dtype=np.int64)
    columns = RiderColumns(
        ids=rider_ids,
        head=head,
        available_given=available_given,
        route_len=f.rider_lists[:, 0].copy(),
        stop_ids=stop_ids,
        stop_pickup=f.stop_kind == KIND_PICKUP,
        stop_rows=rows_of(stop_ids, row_of),
        carried_ids=carried_ids,
        carried_rider=np.repeat(rider_rows, f.rider_lists[:, 1]),
        carried=values[:n_carried],
        picked_rows=rows_of(picked, row_of),
        picked_by=np.repeat(rider_rows, f.rider_lists[:, 2]),
    )
    new = _new_orders(
        order_ids[n_carried:],
        values[n_carried:],
        items[n_carried:],
        f.counts,
        f.count_span[n_carried:],
    )
    if new is None:
        return None
    longest = int(f.rider_lists[:, 0].max()) if n_riders else 0
    return ColumnRound(now, utc_offset_s, columns, new, weights, longest)


def _weights(top: np.ndarray, rules: ColumnRules) -> DispatchWeights | None:
    given_weights = int(top[TOP_PRESENT]) & 2
    bits = int(top[TOP_WEIGHT_BITS]) if given_weights else 0
    got = []
    for k, (default, (lo, hi)) in enumerate(
        zip(rules.weight_defaults, rules.weight_bounds, strict=True)
    ):
        if not bits & (1 << k):
            got.append(default)
            continue
        value = top[TOP_WEIGHTS + k]
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
    # Each order's counts, gathered from wherever the reader put them, one after another.
    at = np.repeat(spans[:, 0] - start[:-1], lengths) + np.arange(int(start[-1]))
    orders = OrderColumns(ids, values, items, start, counts[at])
    return orders if orders.obeys_rules() else None
