"""The domain's rules for the numbers of a round, stated once: each field's range, the order of
an order's times, the clock span of a round. The domain types check one value at a time
(``Range.holds``, ``Range.check``); columns check a whole column at once
(``Range.holds_all``: ``domain.order_columns``, ``planner.rider_columns``) against the same
rows, so a rule added here binds both.

What the kernels need to compute at all; the API's tighter ranges on top are
``domain.bounds``. The structure of a rider's route is stated here too, as data
(``ROUTE_STOPS``: the stops each carried order has on it), which ``Rider`` reads for one
rider and the columns for all; so are the picked-up load within the capacity
(``load_fits``, on one rider's numbers or on every rider's) and ids unique (``distinct``).
Only ``picked_up`` naming the rider's own orders is written in both forms (a set difference
for one rider, an index comparison over columns), held equal by
``tests/planner/test_rider_columns.py``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The least size or capacity a round takes, in box units: the kernels sum loads in float32,
#: where a size of 1e-300 is 0 (an order that takes no room) and a capacity of 5e-324 holds
#: nothing, so such numbers would be accepted and silently mean something else.
MIN_BOX_UNITS = 1e-3
#: A courier slower than 10 cm/s is a data error, not a courier (slower would round to 0 in the
#: kernels' float32 and make every travel time infinite).
MIN_SPEED_MPS = 0.1
#: How far from a round's ``now`` its times may lie, seconds: the kernels keep times as float32
#: seconds since ``now``, exact to well under a second within this span (a week), and a plan
#: priced further out would disagree with itself (a cost and the plan's total apart).
MAX_CLOCK_SPAN_S = 7 * 86_400.0
#: How far a rider's picked-up load may pass its capacity, box units (sums of sizes round).
LOAD_TOLERANCE = 1e-9


def load_fits(load: Any, capacity: Any) -> Any:
    """Whether a rider's picked-up load fits its box: floats, or arrays elementwise (then a
    bool array), both in box units."""
    return load <= capacity + LOAD_TOLERANCE


def distinct(ids: Collection[str]) -> bool:
    """Whether no id repeats."""
    return len(set(ids)) == len(ids)


@dataclass(frozen=True, slots=True)
class Range:
    """Finite and within [lo, hi] (both included; an unbounded ``hi`` does not admit
    infinity, and NaN is in no range)."""

    lo: float = -math.inf
    hi: float = math.inf

    def holds(self, value: float) -> bool:
        # NaN fails both comparisons; only an infinite bound lets an infinity through.
        return self.lo <= value <= self.hi and math.isfinite(value)

    def holds_all(self, values: np.ndarray) -> bool:
        """Every value of ``values`` (any shape) holds."""
        return bool((np.isfinite(values) & (values >= self.lo) & (values <= self.hi)).all())

    def check(self, name: str, value: float) -> None:
        """ValueError naming ``name`` and what is wrong unless ``value`` holds."""
        if self.holds(value):
            return
        if self.lo > -math.inf and self.hi < math.inf:
            raise ValueError(
                f"{name} must be a finite number in [{self.lo:g}, {self.hi:g}], got {value!r}"
            )
        if not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
        raise ValueError(f"{name} must be >= {self.lo}, got {value!r}")


FINITE = Range()
#: ``domain.LatLng``'s fields, degrees.
POSITION = {"lat": Range(-90.0, 90.0), "lng": Range(-180.0, 180.0)}
#: ``domain.Rider``'s numbers (its ``available_at`` also keeps the round's clock span).
RIDER = {
    "speed_mps": Range(MIN_SPEED_MPS),
    "capacity": Range(MIN_BOX_UNITS),
    "available_at": FINITE,
}
#: ``domain.Order``'s numbers (its times also keep the round's clock span, and
#: ``created_at <= promised_at``); ``items`` and ``item_counts`` are counts, >= 0.
ORDER = {
    "created_at": FINITE,
    "ready_at": FINITE,
    "promised_at": FINITE,
    "size": Range(MIN_BOX_UNITS),
    "pickup_service_s": Range(0.0),
    "dropoff_service_s": Range(0.0),
}
#: ``domain.DispatchWeights``' lateness weight (its other fields are counts or may be inf).
LATE_WEIGHT = Range(0.0)
#: The times of a round that keep within ``MAX_CLOCK_SPAN_S`` of its ``now``.
CLOCK_FIELDS = ("created_at", "ready_at", "promised_at", "available_at")


def clock_span(now: float) -> Range:
    """The range a round's times keep at ``now``."""
    return Range(now - MAX_CLOCK_SPAN_S, now + MAX_CLOCK_SPAN_S)


#: The stops a carried order has on its rider's route, in route order, by whether it is
#: picked up (``Rider.picked_up``): both ends while the food is still to be collected, the
#: drop-off alone once it is on board. Kinds by ``domain.StopKind``'s values.
ROUTE_STOPS: dict[bool, tuple[str, ...]] = {
    False: ("pickup", "dropoff"),
    True: ("dropoff",),
}
#: The most stops ``ROUTE_STOPS`` gives an order (the columns' check counts up to it).
MAX_STOPS_PER_ORDER = max(map(len, ROUTE_STOPS.values()))
