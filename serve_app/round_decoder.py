"""A valid JSON dispatch round decoded straight into domain types, in C, for the hot path.

Validating a round with the pydantic models (``serve_app.schemas``) and then building its
domain objects was about half of a round's serving overhead (``bench/serve_load.py``). Here
msgspec reads the body twice:

1. against *wire* Structs with every rule of the pydantic models (types without coercion,
   the bounds of ``domain.bounds``, the configured list limits, no unknown fields), built
   once per ``Limits``;
2. straight into the domain types (``Order``, ``LatLng``, ``Stop``, ``DispatchWeights``: their
   JSON names are their field names, and their ``__post_init__`` runs as usual), the riders
   then assembled.

It only ever *accepts*: any body it does not take whole (an unknown field, a bound, a domain
rule, malformed JSON) returns None, and the caller validates it with the pydantic model, which
gives the answer (the 422 naming the field, the 413 naming the limit) exactly as before. So the
wire rules may be stricter than the models' but never looser: ``tests/serve/
test_round_decoder.py`` holds every body it accepts to the models' own domain round.
"""

# No ``from __future__ import annotations``: the per-limits Structs are classes inside a
# function, and msgspec reads their annotations as objects.
import functools
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from domain import (
    DispatchRound,
    DispatchWeights,
    LatLng,
    Order,
    Rider,
    Route,
    Stop,
    StopKind,
    bounds,
)
from serve_app.pipeline.dispatch import DispatchCall
from serve_app.pipeline.limits import Limits


# The bounds of ``domain.bounds`` and the defaults of the domain types, as msgspec reads them.
# Every Struct here is gc=False: plain data that never forms a cycle, so the collector need not
# track it (a big round is tens of thousands of them, discarded or unpacked at once; tracked,
# they set off collections that scan them all).
def _between(kind: type, span: tuple[float, float]) -> Any:
    return Annotated[kind, Meta(ge=span[0], le=span[1])]


_Id = Annotated[str, Meta(min_length=bounds.ID_LENGTH[0], max_length=bounds.ID_LENGTH[1])]
_Seconds = _between(float, bounds.TIME_S)
_Duration = _between(float, bounds.DURATION_S)
_Count = _between(int, bounds.COUNT)
_ORDER = bounds.defaults(Order)
_WEIGHTS = bounds.defaults(DispatchWeights)


class _Position(Struct, forbid_unknown_fields=True, gc=False):
    lat: _between(float, bounds.LATITUDE)
    lng: _between(float, bounds.LONGITUDE)


class _Order(Struct, forbid_unknown_fields=True, gc=False):
    id: _Id
    pickup: _Position
    dropoff: _Position
    created_at: _Seconds
    ready_at: _Seconds
    promised_at: _Seconds
    size: _between(float, bounds.ORDER_SIZE) = _ORDER["size"]
    items: _Count = _ORDER["items"]
    item_counts: Annotated[list[_Count], Meta(max_length=bounds.MAX_ITEM_KINDS)] = []
    pickup_service_s: _Duration = _ORDER["pickup_service_s"]
    dropoff_service_s: _Duration = _ORDER["dropoff_service_s"]


class _WireStop(Struct, forbid_unknown_fields=True, gc=False):
    order_id: _Id
    kind: StopKind


class _Weights(Struct, forbid_unknown_fields=True, gc=False):
    late_weight: _between(float, bounds.LATE_WEIGHT) = _WEIGHTS["late_weight"]
    max_lateness_s: _between(float, bounds.MAX_LATENESS_S) = _WEIGHTS["max_lateness_s"]
    max_orders_per_rider: _between(int, bounds.MAX_ORDERS_PER_RIDER) = _WEIGHTS[
        "max_orders_per_rider"
    ]
    candidate_riders: Annotated[int, Meta(ge=bounds.MIN_CANDIDATE_RIDERS)] | None = _WEIGHTS[
        "candidate_riders"
    ]
    etr_floor: bool = _WEIGHTS["etr_floor"]


def _wire_round(limits: Limits) -> type[Struct]:
    """The wire Structs of a round under ``limits`` (the list bounds are the limits)."""
    stops = limits.max_route_stops

    class _Rider(Struct, forbid_unknown_fields=True, gc=False):
        id: _Id
        position: _Position
        speed_mps: _between(float, bounds.RIDER_SPEED_MPS)
        capacity: _between(float, bounds.RIDER_CAPACITY)
        route: Annotated[list[_WireStop], Meta(max_length=stops)] = []
        orders: Annotated[list[_Order], Meta(max_length=stops)] = []
        picked_up: Annotated[list[_Id], Meta(max_length=stops)] = []
        available_at: _Seconds | None = None

    class _Round(Struct, forbid_unknown_fields=True, gc=False):
        now: _Seconds
        riders: Annotated[list[_Rider], Meta(max_length=limits.max_riders)]
        orders: Annotated[list[_Order], Meta(max_length=limits.max_orders)]
        weights: _Weights = msgspec.field(default_factory=_Weights)
        utc_offset_s: _between(float, bounds.UTC_OFFSET_S) = 0.0

    return _Round


# The same body read into domain types (already checked against the wire rules).
class _DomainRider(Struct, gc=False):
    id: str
    position: LatLng
    speed_mps: float
    capacity: float
    route: list[Stop] = []
    orders: list[Order] = []
    picked_up: list[str] = []
    available_at: float | None = None


class _DomainRound(Struct, gc=False):
    now: float
    riders: list[_DomainRider]
    orders: list[Order]
    weights: DispatchWeights = msgspec.field(default_factory=DispatchWeights)
    utc_offset_s: float = 0.0


class RoundDecoder:
    """``decode(body)``: the round as a ``DispatchCall`` when the JSON ``body`` is a valid
    dispatch request under ``limits``, else None (validate it with the pydantic model)."""

    def __init__(self, limits: Limits) -> None:
        self._wire = msgspec.json.Decoder(_wire_round(limits))
        self._domain = msgspec.json.Decoder(_DomainRound)

    @staticmethod
    @functools.cache
    def for_limits(limits: Limits) -> "RoundDecoder":
        return RoundDecoder(limits)

    def decode(self, body: bytes) -> DispatchCall | None:
        try:
            self._wire.decode(body)  # the models' rules; the result is not needed
            # Order.__post_init__ refuses a promise before creation (the models' own check).
            got: Any = self._domain.decode(body)
            riders = tuple(
                Rider(
                    r.id,
                    r.position,
                    r.speed_mps,
                    r.capacity,
                    Route(tuple(r.route)),
                    tuple(r.orders),
                    frozenset(r.picked_up),
                    r.available_at,
                )
                for r in got.riders
            )
            round_ = DispatchRound(got.now, riders, tuple(got.orders), got.weights)
        except (msgspec.DecodeError, ValueError, TypeError):
            return None
        return DispatchCall(round_, got.utc_offset_s)
