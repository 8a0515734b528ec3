"""The request's keys, for the compiled readers that find a value by its name (JSON's and
msgpack's walks): each object's keys in the walkers' numbering, a name's lookup, and where each
key's value goes in the columns every reader fills (``round_columns``' layout, read from it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from serve_app.round_columns import (
    ORDER_BITS,
    ORDER_VALUES,
    RIDER_BITS,
    RIDER_VALUES,
    TOP_BITS,
    WEIGHT_BITS,
)

#: Each object's keys, in the order the walker's code numbers them.
TOP_KEYS = ("now", "riders", "orders", "weights", "utc_offset_s")
RIDER_KEYS = (
    "id",
    "position",
    "speed_mps",
    "capacity",
    "route",
    "orders",
    "picked_up",
    "available_at",
)
POSITION_KEYS = ("lat", "lng")
STOP_KEYS = ("order_id", "kind")
ORDER_KEYS = (
    "id",
    "pickup",
    "dropoff",
    "created_at",
    "ready_at",
    "promised_at",
    "size",
    "items",
    "item_counts",
    "pickup_service_s",
    "dropoff_service_s",
)
WEIGHT_KEYS = WEIGHT_BITS
OBJECT_KEYS = (TOP_KEYS, RIDER_KEYS, POSITION_KEYS, STOP_KEYS, ORDER_KEYS, WEIGHT_KEYS)
TOP, RIDER, POSITION, STOP, ORDER, WEIGHTS = range(len(OBJECT_KEYS))
_SLOTS = 256


def _slot(name: bytes) -> int:
    """A key's hash slot (``key_number`` computes the same over a body's bytes)."""
    return (len(name) * 31 + name[0] * 7 + name[-1] * 3 + name[len(name) // 2] * 5) % _SLOTS


def _key_tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(uint8 names one after another, int64[K + 1] where each starts, int64[objects, slots]
    the key's number in its object by its hash slot, -1 for none)."""
    names = [name.encode() for keys in OBJECT_KEYS for name in keys]
    starts = np.zeros(len(names) + 1, np.int64)
    starts[1:] = np.cumsum([len(n) for n in names])
    table = np.full((len(OBJECT_KEYS), _SLOTS), -1, np.int64)
    first = 0
    for kind, keys in enumerate(OBJECT_KEYS):
        for k, name in enumerate(keys):
            slot = _slot(name.encode())
            if table[kind, slot] >= 0:
                raise RuntimeError(f"two keys of one object share a slot: {name}")
            table[kind, slot] = first + k
        first += len(keys)
    return np.frombuffer(b"".join(names), np.uint8).copy(), starts, table


_NAMES, _NAME_START, _KEY_SLOT = _key_tables()
_KIND_BASE = np.cumsum([0] + [len(k) for k in OBJECT_KEYS])[:-1].astype(np.int64)


def _where(keys: tuple[str, ...], layout: tuple[str, ...]) -> np.ndarray:
    """int64[K]: each key's place in ``layout``, else its ``.lat``'s (a position's first
    value column), else -1: the presence bit or value column of each key."""
    found = [k if k in layout else k + ".lat" for k in keys]
    return np.array([layout.index(k) if k in layout else -1 for k in found], np.int64)


ORDER_BIT = _where(ORDER_KEYS, ORDER_BITS)
ORDER_COLUMN = _where(ORDER_KEYS, ORDER_VALUES)
ORDER_ID, PICKUP, DROPOFF = (ORDER_KEYS.index(k) for k in ("id", "pickup", "dropoff"))
ITEMS, ITEM_COUNTS = ORDER_KEYS.index("items"), ORDER_KEYS.index("item_counts")
RIDER_BIT = _where(RIDER_KEYS, RIDER_BITS)
RIDER_COLUMN = _where(RIDER_KEYS, RIDER_VALUES)
RIDER_ID, POSITION_KEY, ROUTE, CARRIED, PICKED, AVAILABLE = (
    RIDER_KEYS.index(k) for k in ("id", "position", "route", "orders", "picked_up", "available_at")
)
TOP_BIT = _where(TOP_KEYS, TOP_BITS)
NOW, RIDERS, NEW, WEIGHT_KEY, OFFSET = (
    TOP_KEYS.index(k) for k in ("now", "riders", "orders", "weights", "utc_offset_s")
)
# Weights that are integers, and the one that is a bool; the others are floats.
INTEGER_WEIGHT = np.array([k in ("max_orders_per_rider", "candidate_riders") for k in WEIGHT_KEYS])
NULLABLE_WEIGHT = np.array([k == "candidate_riders" for k in WEIGHT_KEYS])
BOOL_WEIGHT = WEIGHT_KEYS.index("etr_floor")
KIND_PICKUP_WORD = np.frombuffer(b"pickup", np.uint8).copy()
KIND_DROPOFF_WORD = np.frombuffer(b"dropoff", np.uint8).copy()
MAX_EXACT_INT = float(2**53)  # an integer field's value past this is not read exactly


@njit(cache=True, nogil=True)
def key_number(buf, start, stop, kind):
    """The number, in object ``kind``, of the key whose name is ``buf[start:stop]``; -1 for a
    name the object does not have."""
    n = stop - start
    if n <= 0:
        return -1
    slot = (n * 31 + buf[start] * 7 + buf[stop - 1] * 3 + buf[start + n // 2] * 5) % _SLOTS
    at = _KEY_SLOT[kind, slot]
    if at < 0:
        return -1
    a = _NAME_START[at]
    if _NAME_START[at + 1] - a != n:
        return -1
    for k in range(n):
        if buf[start + k] != _NAMES[a + k]:
            return -1
    return at - _KIND_BASE[kind]
