"""A round's riders as columns: every rider, committed stop and carried order one row of a
flat array, and the domain's rules for them checked over whole columns at once.

This is the form the packer reads (``planner.round_to_arrays``). It is built from anything with
the field names of ``domain.Rider`` (``RiderLike``): the domain types themselves, or the
request's wire Structs, so that a served round becomes arrays without a Python object per
stop and per carried order (a 5000-rider round holds ~30,000 stops and ~15,000 orders).

Built from wire data, the columns have not been through the domain types' checks:
``obeys_domain_rules`` holds them to those rules (``Rider``, ``DispatchRound`` and the
``Order`` numbers the columns keep). It is sound, not complete: it may refuse a valid round
(the caller then builds domain types, whose checks give the answer) but never passes one the
domain types refuse; ``tests/planner/test_rider_columns.py`` holds it so, rule by rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter, is_
from typing import Any, Protocol

import numpy as np

from domain import StopKind
from domain.order_columns import (
    ORDER_FIELDS,
    SIZE,
    TIMES,
    OrderColumns,
    numbers_obey_rules,
    order_numbers,
)
from domain.rules import (
    FINITE,
    MAX_STOPS_PER_ORDER,
    POSITION,
    RIDER,
    ROUTE_STOPS,
    clock_span,
    distinct,
    load_fits,
)

#: The columns of ``RiderColumns.head``.
HEAD_FIELDS = ("lat", "lng", "speed_mps", "capacity", "available_at")
LAT, LNG, SPEED, CAPACITY, AVAILABLE = range(len(HEAD_FIELDS))
#: The columns of ``RiderColumns.carried``: an order's numbers, laid out as everywhere.
CARRIED_FIELDS = ORDER_FIELDS
#: Each head column's rule in ``domain.rules`` (by the field it holds: a rider's, or a
#: position's coordinate), as (column, rule).
_HEAD_RULES = tuple(
    (i, POSITION[name] if name in POSITION else RIDER[name])
    for i, name in enumerate(HEAD_FIELDS)
    if name != "available_at"
)
#: ``domain.rules.ROUTE_STOPS`` as arrays, by picked (0, 1): how many stops, and whether the
#: k-th is a pickup.
_STOPS_LEN = np.array([len(ROUTE_STOPS[p]) for p in (False, True)], np.int64)
_STOPS_PICKUP = np.array(
    [
        [k < len(ROUTE_STOPS[p]) and ROUTE_STOPS[p][k] == StopKind.PICKUP for k in range(2)]
        for p in (False, True)
    ],
    np.bool_,
)
if MAX_STOPS_PER_ORDER != 2:  # _routes_obey_rules tells an order's stops apart as first or not
    raise RuntimeError("the columns' route check reads at most two stops an order")
#: ``obeys_domain_rules`` passes a picked-up load only this far (relative) under the
#: capacity: summed in another order than ``Rider.onboard_load`` sums it, the load may differ
#: from that one by a few units in the last place per order.
LOAD_MARGIN = 1e-12


class RiderLike(Protocol):
    """``domain.Rider``'s fields, as a domain rider or a request's wire Struct holds them:
    ``route`` iterates stops with ``order_id`` and ``kind``; ``orders`` have the fields of
    ``domain.Order`` (positions with ``lat`` and ``lng``); ``picked_up`` holds order ids."""

    id: str
    position: Any
    speed_mps: float
    capacity: float
    route: Any
    orders: Any
    picked_up: Any
    available_at: float | None


@dataclass(frozen=True)
class RiderColumns:
    """R riders (round order), S committed stops (riders in order, each route in slot order),
    C carried orders (riders in order, each rider's ``orders`` in order), N names in the
    riders' ``picked_up``.

    ids : R rider ids.
    head : float64[R, 5], ``HEAD_FIELDS``; ``available_at`` NaN where none is given.
    available_given : bool[R] the rider gave an ``available_at`` (a NaN given is not none).
    route_len : int64[R] stops on each rider's route.
    stop_ids : S order ids; stop_pickup : bool[S] pickup (else drop-off).
    stop_rows : int64[S] the carried row of each stop's order (-1: no rider carries it; the
        last such row where carried ids repeat, which ``obeys_domain_rules`` refuses).
    carried_ids : C order ids; carried_rider : int64[C] the row of the rider carrying each.
    carried : float64[C, 10], ``CARRIED_FIELDS``.
    picked_rows, picked_by : int64[N] the carried row each ``picked_up`` name names (-1:
        none) and the row of the rider naming it.
    """

    ids: list[str]
    head: np.ndarray
    available_given: np.ndarray
    route_len: np.ndarray
    stop_ids: list[str]
    stop_pickup: np.ndarray
    stop_rows: np.ndarray
    carried_ids: list[str]
    carried_rider: np.ndarray
    carried: np.ndarray
    picked_rows: np.ndarray
    picked_by: np.ndarray

    @property
    def picked(self) -> np.ndarray:
        """bool[C]: already on board."""
        on = np.zeros(len(self.carried_ids), np.bool_)
        on[self.picked_rows[self.picked_rows >= 0]] = True
        return on

    def onboard_load(self) -> np.ndarray:
        """float64[R]: the sizes of each rider's picked-up orders, summed in ``orders`` order."""
        on = self.picked
        return np.bincount(
            self.carried_rider[on], weights=self.carried[on, SIZE], minlength=len(self.ids)
        )


_HEAD = attrgetter("position.lat", "position.lng", "speed_mps", "capacity")


def _flat(lists: Iterable[Iterable[Any]]) -> list[Any]:
    return list(chain.from_iterable(lists))


def rows_of(ids: Iterable[str], row_of: dict[str, int]) -> np.ndarray:
    """int64[N]: each id's row in ``row_of``, -1 where it has none."""
    got = list(map(row_of.get, ids, repeat(-1)))
    return np.array(got, np.int64).reshape(len(got))


def rider_columns(riders: Sequence[RiderLike]) -> RiderColumns:
    """The columns of ``riders`` (domain riders or wire Structs with their field names).

    Gathered with ``map`` and ``attrgetter`` (C loops), not a Python loop per stop: a
    5000-rider round has ~30,000 stops and ~15,000 carried orders."""
    n = len(riders)
    head = np.empty((n, len(HEAD_FIELDS)), np.float64)
    head[:, :AVAILABLE] = np.fromiter(
        chain.from_iterable(map(_HEAD, riders)), np.float64, n * AVAILABLE
    ).reshape(n, AVAILABLE)
    available = [r.available_at for r in riders]
    head[:, AVAILABLE] = np.array([math.nan if t is None else t for t in available], np.float64)
    routes = list(map(attrgetter("route"), riders))
    route_len = np.fromiter(map(len, routes), np.int64, n)
    stops = _flat(routes)
    kinds = map(attrgetter("kind"), stops)
    orders = list(map(attrgetter("orders"), riders))
    carried = _flat(orders)
    carried_ids = list(map(attrgetter("id"), carried))
    row_of = dict(zip(carried_ids, range(len(carried)), strict=True))
    picked = list(map(attrgetter("picked_up"), riders))
    stop_ids = list(map(attrgetter("order_id"), stops))
    return RiderColumns(
        ids=list(map(attrgetter("id"), riders)),
        head=head,
        available_given=np.array([t is not None for t in available], np.bool_).reshape(n),
        route_len=route_len,
        stop_ids=stop_ids,
        stop_pickup=np.fromiter(map(is_, kinds, repeat(StopKind.PICKUP)), np.bool_, len(stops)),
        stop_rows=rows_of(stop_ids, row_of),
        carried_ids=carried_ids,
        carried_rider=np.repeat(np.arange(n, dtype=np.int64), list(map(len, orders))),
        carried=order_numbers(carried),
        picked_rows=rows_of(_flat(picked), row_of),
        picked_by=np.repeat(np.arange(n, dtype=np.int64), list(map(len, picked))),
    )


def obeys_domain_rules(cols: RiderColumns, now: float, new: OrderColumns) -> bool:
    """True only when these riders, with the new orders ``new``, make a ``DispatchRound`` at
    ``now`` that the domain types accept. Checked here: every rule of ``Rider`` and
    ``DispatchRound``, every rule of ``Order`` for the new orders
    (``OrderColumns.obeys_rules``), and those on the numbers the columns keep for the carried
    ones (their ``items`` and ``item_counts`` are not kept; the request's bounds keep them
    >= 0)."""
    n_riders, n_carried = len(cols.ids), len(cols.carried_ids)
    head, c = cols.head, cols.carried
    if not FINITE.holds(now) or not (all(cols.ids) and all(cols.carried_ids)):
        return False
    if not (distinct(cols.ids) and distinct(new.ids) and new.obeys_rules()):
        return False
    carried = set(cols.carried_ids)
    # Unique across the round: within a rider's orders and on no two riders.
    if len(carried) != n_carried or not carried.isdisjoint(new.ids):
        return False
    available, given = head[:, AVAILABLE], cols.available_given
    # The rules of domain.rules, each over its whole column (available_at below: NaN where
    # none is given).
    numbers = all(rule.holds_all(head[:, i]) for i, rule in _HEAD_RULES) and numbers_obey_rules(c)
    # Every time within the span of now (which also makes each one finite).
    span = clock_span(now)
    clock = (
        span.holds_all(c[:, TIMES])
        and span.holds_all(new.times())
        and span.holds_all(available[given])
    )
    if not (numbers and clock):
        return False
    return _routes_obey_rules(cols, n_riders, n_carried)


def _routes_obey_rules(cols: RiderColumns, n_riders: int, n_carried: int) -> bool:
    """``Rider._check_route`` over all riders: each carried order on its own rider's route as
    [pickup, drop-off], or [drop-off] once picked up; ``picked_up`` naming only the rider's
    orders; the picked-up load within the capacity."""
    rows, named = cols.stop_rows, cols.picked_rows
    if (rows < 0).any() or (named < 0).any():
        return False
    rider_of_stop = np.repeat(np.arange(n_riders, dtype=np.int64), cols.route_len)
    # Each stop, and each picked-up name, of an order its own rider carries.
    if not (cols.carried_rider[rows] == rider_of_stop).all():
        return False
    if not (cols.carried_rider[named] == cols.picked_by).all():
        return False
    # Each carried order's stops, in route order, are ROUTE_STOPS[picked]: as many, and the
    # k-th of each the kind the table says (an order's stops are on one route, so the stops'
    # order is its route order).
    picked = cols.picked
    want_len = _STOPS_LEN[picked.astype(np.int64)]
    if not (np.bincount(rows, minlength=n_carried) == want_len).all():
        return False
    where = np.arange(len(rows))
    first = np.empty(n_carried, np.int64)
    first[rows[::-1]] = where[::-1]  # each order's first stop (the last write wins)
    nth = (where != first[rows]).astype(np.int64)  # 0 or 1: MAX_STOPS_PER_ORDER is 2
    if not (_STOPS_PICKUP[picked[rows].astype(np.int64), nth] == cols.stop_pickup).all():
        return False
    load = cols.onboard_load() * (1.0 + LOAD_MARGIN)
    return bool(load_fits(load, cols.head[:, CAPACITY]).all())
