"""ETR features: one vectorised function shared by training and serving (NumPy or CuPy).

The model predicts minutes from order to delivery from:

====================  ===========================================================
column(s)             meaning
====================  ===========================================================
hour                  decimal hour of the order, local time, [0, 24)
hour_sin, hour_cos    the same on the 24 h circle
day_Mon .. day_Sun    one-hot day of the week
distance_mi           straight-line restaurant -> customer distance, miles
item_01 .. item_27    count of each menu item
items_total           sum of the item counts
====================  ===========================================================

``F = 39`` columns, float32. Training reads these from the delivery data set's columns;
serving computes them from ``domain.Order`` (``features_from_orders``) or from orders as
columns (``features_from_columns``, a served round's), so all go through ``build_features``
and cannot drift apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from domain import Order, haversine_m
from domain.geo import haversine_deg_m
from domain.order_columns import (
    CREATED,
    DROPOFF_LAT,
    DROPOFF_LNG,
    PICKUP_LAT,
    PICKUP_LNG,
    OrderColumns,
)

N_MENU_ITEMS = 27
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
FEATURE_NAMES: tuple[str, ...] = (
    "hour",
    "hour_sin",
    "hour_cos",
    *(f"day_{d}" for d in DAYS),
    "distance_mi",
    *(f"item_{k:02d}" for k in range(1, N_MENU_ITEMS + 1)),
    "items_total",
)
N_FEATURES = len(FEATURE_NAMES)
METRES_PER_MILE = 1609.344


def build_features(
    hour: Any, day: Any, distance_mi: Any, item_counts: Any, xp: ModuleType = np
) -> Any:
    """The model's input matrix.

    hour : float[B], local decimal hour in [0, 24).
    day : int[B], day of week, 0 = Monday .. 6 = Sunday.
    distance_mi : float[B], miles.
    item_counts : float or int[B, 27].
    Returns float32[B, 39] (``FEATURE_NAMES`` order).
    Raises ValueError on mismatched lengths, a day outside 0..6 or a wrong item width.
    """
    hour = xp.asarray(hour, dtype=xp.float32)
    day = xp.asarray(day)
    distance_mi = xp.asarray(distance_mi, dtype=xp.float32)
    items = xp.asarray(item_counts, dtype=xp.float32)
    n = hour.shape[0]
    if day.shape != (n,) or distance_mi.shape != (n,) or items.shape != (n, N_MENU_ITEMS):
        raise ValueError(
            f"expected hour[B], day[B], distance_mi[B], item_counts[B, {N_MENU_ITEMS}]; got "
            f"{hour.shape}, {day.shape}, {distance_mi.shape}, {items.shape}"
        )
    if n and (bool((day < 0).any()) or bool((day > 6).any())):
        raise ValueError("day must be in 0..6 (Monday = 0)")
    out = xp.empty((n, N_FEATURES), xp.float32)
    angle = hour * xp.float32(2 * math.pi / 24)
    out[:, 0] = hour
    out[:, 1] = xp.sin(angle)
    out[:, 2] = xp.cos(angle)
    out[:, 3:10] = (day[:, None] == xp.arange(7)[None, :]).astype(xp.float32)
    out[:, 10] = distance_mi
    out[:, 11 : 11 + N_MENU_ITEMS] = items
    out[:, 11 + N_MENU_ITEMS] = items.sum(axis=1)
    return out


#: Up to this many orders, ``features_from_orders`` fills rows one by one (``_rows``): an
#: online ETR request has one or a few orders, and the vectorised path's two dozen NumPy calls
#: cost several times one row's arithmetic at that size.
ROWS_ONE_BY_ONE = 8
_ANGLE_PER_HOUR = np.float32(2 * math.pi / 24)


def features_from_orders(
    orders: Sequence[Order], *, utc_offset_s: float = 0.0, xp: ModuleType = np
) -> Any:
    """``build_features`` for domain orders: hour and day from ``created_at`` (Unix seconds)
    shifted by ``utc_offset_s`` to local time, distance pickup -> drop-off (haversine).

    Returns float32[B, 39]. Raises ValueError on an order with more than 27 item counts (or
    one past 64 bits).
    """
    if xp is np and len(orders) <= ROWS_ONE_BY_ONE:
        return _rows(orders, utc_offset_s)
    return features_from_columns(OrderColumns.of(orders), utc_offset_s=utc_offset_s, xp=xp)


def features_from_columns(
    orders: OrderColumns, *, utc_offset_s: float = 0.0, xp: ModuleType = np
) -> Any:
    """``features_from_orders`` for orders as columns (a served round's new orders): the same
    numbers, without an ``Order`` each. Returns float32[B, 39]; raises ValueError on an order
    with more than 27 item counts."""
    v = orders.values
    ends = v[:, [PICKUP_LAT, PICKUP_LNG, DROPOFF_LAT, DROPOFF_LNG]].tolist()
    dist = np.array([haversine_deg_m(*e) / METRES_PER_MILE for e in ends], np.float64)
    items = orders.item_matrix(N_MENU_ITEMS)
    local = v[:, CREATED] + utc_offset_s
    hour = (local % 86400.0) / 3600.0
    # 1970-01-01 was a Thursday (Monday = 0 -> Thursday = 3).
    day = ((np.floor(local / 86400.0).astype(np.int64) + 3) % 7).astype(np.int64)
    return build_features(
        xp.asarray(hour),
        xp.asarray(day),
        xp.asarray(dist.reshape(len(ends))),
        xp.asarray(items),
        xp=xp,
    )


def _rows(orders: Sequence[Order], utc_offset_s: float) -> np.ndarray:
    """``features_from_orders`` one row at a time, for a few orders: the same arithmetic in
    the same precisions (float64 times and distances, float32 angle, NumPy's float32 sine and
    cosine), held equal to the vectorised path by ``tests/etr/test_features.py``."""
    out = np.zeros((len(orders), N_FEATURES), np.float32)
    for k, o in enumerate(orders):
        if len(o.item_counts) > N_MENU_ITEMS:
            raise ValueError(
                f"order {o.id}: {len(o.item_counts)} item counts, the menu has {N_MENU_ITEMS}"
            )
        local = o.created_at + utc_offset_s
        hour = np.float32((local % 86400.0) / 3600.0)
        angle = hour * _ANGLE_PER_HOUR
        row = out[k]
        row[0], row[1], row[2] = hour, np.sin(angle), np.cos(angle)
        row[3 + (math.floor(local / 86400.0) + 3) % 7] = 1.0
        row[10] = haversine_m(o.pickup, o.dropoff) / METRES_PER_MILE
        if o.item_counts:
            items = np.asarray(o.item_counts, np.float32)
            row[11 : 11 + len(items)] = items
            row[11 + N_MENU_ITEMS] = items.sum()
    return out
