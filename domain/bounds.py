"""The bounds a served dispatch round's inputs must keep, stated once.

The domain's rules (``domain.rules``) are what the kernels need to compute at all (finite
numbers, sizes of at least ``MIN_BOX_UNITS``, times within ``MAX_CLOCK_SPAN_S`` of the round's
now); these are the ranges the API accepts on top, so that every accepted value is a
meaningful one and a request's cost stays bounded. Both request decoders
(``serve_app.schemas``' models and ``serve_app.round_decoder``'s wire Structs), the MDRP
replay and the API reference read them here; defaults come from the domain types' own fields
(``defaults``).

Each range is ``(lowest, highest)``, both included.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from domain.rules import MIN_BOX_UNITS, MIN_SPEED_MPS

#: An id's length in characters.
ID_LENGTH = (1, 128)
#: A time on the round's clock, seconds (e.g. Unix time): 1e10 is the year 2286, far past any
#: real clock and small enough that differences between times stay exact in float64.
TIME_S = (0.0, 1e10)
#: A duration (service times, the hard lateness limit), seconds: a day.
DURATION_S = (0.0, 86_400.0)
#: A count of items (an order's items, one menu item's count).
COUNT = (0, 10_000)
#: Menu items an order's ``item_counts`` may list (the ETR model's menu).
MAX_ITEM_KINDS = 27
LATITUDE = (-90.0, 90.0)
LONGITUDE = (-180.0, 180.0)
#: An order's size and a rider's capacity, box units.
ORDER_SIZE = (MIN_BOX_UNITS, 1000.0)
RIDER_CAPACITY = (MIN_BOX_UNITS, 10_000.0)
RIDER_SPEED_MPS = (MIN_SPEED_MPS, 50.0)
#: The round's local time offset for the ETR features, seconds (UTC-14 to UTC+14).
UTC_OFFSET_S = (-50_400.0, 50_400.0)
#: The dispatch weights (``DispatchWeights``).
LATE_WEIGHT = (0.0, 1000.0)
MAX_LATENESS_S = DURATION_S
MAX_ORDERS_PER_RIDER = (1, 10)
MIN_CANDIDATE_RIDERS = 1


def defaults(cls: type) -> dict[str, Any]:
    """The default of every field of the dataclass ``cls`` that has a plain one."""
    return {
        f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
    }
