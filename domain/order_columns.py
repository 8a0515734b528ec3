"""Orders as columns: one row per order, its numbers in one float64 matrix, so that the served
path reads, checks, prices and packs a round's orders without an object each (a 5000 x 2000
round brings 2,000 new orders, and its riders carry ~15,000 more).

``ORDER_FIELDS`` is the layout of an order's numbers wherever they are columns: the new orders
here (``OrderColumns``) and the orders riders carry (``planner.rider_columns``). The rules
are ``domain.rules``' own: ``numbers_obey_rules`` checks each column against the row ``Order``
checks one value at a time, and ``OrderColumns.obeys_rules`` adds the rest of ``Order``'s
checks, so a request's orders need never be built as ``Order`` to be held to them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any, Protocol

import numpy as np

from domain.geo import LatLng
from domain.rules import ORDER, POSITION
from domain.types import Order

#: The columns of an order's numbers (``OrderColumns.values``, ``RiderColumns.carried``).
ORDER_FIELDS = (
    "pickup_lat",
    "pickup_lng",
    "dropoff_lat",
    "dropoff_lng",
    "created_at",
    "ready_at",
    "promised_at",
    "pickup_service_s",
    "dropoff_service_s",
    "size",
)
(
    PICKUP_LAT,
    PICKUP_LNG,
    DROPOFF_LAT,
    DROPOFF_LNG,
    CREATED,
    READY,
    PROMISED,
    PICKUP_SERVICE,
    DROPOFF_SERVICE,
    SIZE,
) = range(len(ORDER_FIELDS))
#: The three times of ``ORDER_FIELDS`` (created, ready, promised), in that order.
TIMES = [CREATED, READY, PROMISED]
#: Each column's rule in ``domain.rules`` (a position's coordinate, else the order's field),
#: as (column, rule).
COLUMN_RULES = tuple(
    (i, POSITION[name.split("_")[1]] if name.endswith(("_lat", "_lng")) else ORDER[name])
    for i, name in enumerate(ORDER_FIELDS)
)
#: One order's numbers in ``ORDER_FIELDS`` order (a domain ``Order`` or anything with its
#: field names, such as a request's wire Struct).
_NUMBERS = attrgetter(
    "pickup.lat",
    "pickup.lng",
    "dropoff.lat",
    "dropoff.lng",
    *ORDER_FIELDS[CREATED:],
)


class OrderLike(Protocol):
    """``domain.Order``'s fields, as a domain order or a request's wire Struct holds them
    (``pickup`` and ``dropoff`` with ``lat`` and ``lng``)."""

    id: str
    pickup: Any
    dropoff: Any
    created_at: float
    ready_at: float
    promised_at: float
    size: float
    items: int
    pickup_service_s: float
    dropoff_service_s: float
    item_counts: Any


def order_numbers(orders: Sequence[OrderLike]) -> np.ndarray:
    """float64[N, 10]: the orders' numbers, ``ORDER_FIELDS`` (gathered by ``map`` and
    ``attrgetter``, C loops: no Python loop per order)."""
    n = len(orders)
    flat = np.fromiter(
        chain.from_iterable(map(_NUMBERS, orders)), np.float64, n * len(ORDER_FIELDS)
    )
    return flat.reshape(n, len(ORDER_FIELDS))


def numbers_obey_rules(values: np.ndarray) -> bool:
    """Whether every row of ``values`` (float64[N, 10], ``ORDER_FIELDS``) keeps ``Order``'s
    rules on its numbers: each field's range (finite included) and ``created_at <=
    promised_at``."""
    return all(rule.holds_all(values[:, i]) for i, rule in COLUMN_RULES) and bool(
        (values[:, CREATED] <= values[:, PROMISED]).all()
    )


@dataclass(frozen=True)
class OrderColumns:
    """O orders, in order.

    ids : O ids. values : float64[O, 10], ``ORDER_FIELDS``. items : int64[O].
    count_start : int64[O + 1], counts : int64[K]: order k's ``item_counts`` are
        ``counts[count_start[k]:count_start[k + 1]]``.
    """

    ids: list[str]
    values: np.ndarray
    items: np.ndarray
    count_start: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    @staticmethod
    def of(orders: Sequence[OrderLike]) -> OrderColumns:
        """The columns of ``orders`` (domain orders, or wire Structs with their field names).
        Raises ValueError for an item count or ``items`` outside int64 (a request's bounds
        keep them far inside)."""
        n = len(orders)
        listed = list(map(attrgetter("item_counts"), orders))
        lengths = np.fromiter(map(len, listed), np.int64, n)
        start = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=start[1:])
        try:
            items = np.fromiter(map(attrgetter("items"), orders), np.int64, n)
            counts = np.fromiter(chain.from_iterable(listed), np.int64, int(start[-1]))
        except OverflowError as exc:
            raise ValueError(f"items and item_counts must fit in 64 bits: {exc}") from None
        return OrderColumns(
            ids=list(map(attrgetter("id"), orders)),
            values=order_numbers(orders),
            items=items,
            count_start=start,
            counts=counts,
        )

    def times(self) -> np.ndarray:
        """float64[O, 3]: created, ready, promised."""
        return self.values[:, TIMES]

    def obeys_rules(self) -> bool:
        """Whether ``Order`` accepts every order: ids non-empty, the numbers' rules
        (``numbers_obey_rules``), items and item counts >= 0."""
        return (
            all(self.ids)
            and numbers_obey_rules(self.values)
            and bool((self.items >= 0).all())
            and bool((self.counts >= 0).all())
        )

    def item_matrix(self, width: int) -> np.ndarray:
        """float32[O, width]: each order's item counts, zero-padded. Raises ValueError naming
        the first order with more than ``width`` counts."""
        lengths = np.diff(self.count_start)
        too_long = np.nonzero(lengths > width)[0]
        if len(too_long):
            k = int(too_long[0])
            raise ValueError(
                f"order {self.ids[k]}: {int(lengths[k])} item counts, the menu has {width}"
            )
        out = np.zeros((len(self.ids), width), np.float32)
        rows = np.repeat(np.arange(len(self.ids)), lengths)
        cols = np.arange(len(self.counts)) - np.repeat(self.count_start[:-1], lengths)
        out[rows, cols] = self.counts
        return out

    def to_orders(self) -> tuple[Order, ...]:
        """The orders as domain types (their checks run: ValueError naming the field)."""
        counts = self.counts.tolist()
        bounds = self.count_start.tolist()
        return tuple(
            Order(
                id=i,
                pickup=LatLng(v[PICKUP_LAT], v[PICKUP_LNG]),
                dropoff=LatLng(v[DROPOFF_LAT], v[DROPOFF_LNG]),
                created_at=v[CREATED],
                ready_at=v[READY],
                promised_at=v[PROMISED],
                pickup_service_s=v[PICKUP_SERVICE],
                dropoff_service_s=v[DROPOFF_SERVICE],
                size=v[SIZE],
                items=n,
                item_counts=tuple(counts[a:b]),
            )
            for i, v, n, a, b in zip(
                self.ids,
                self.values.tolist(),
                self.items.tolist(),
                bounds[:-1],
                bounds[1:],
                strict=True,
            )
        )
