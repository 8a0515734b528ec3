"""The dispatch domain: riders, orders, routes, rounds and plans.

Every time is seconds on one clock shared by a round (for example Unix epoch seconds); every
duration is seconds; positions are :class:`~domain.geo.LatLng`; sizes are capacity units (for
example bags). All types are frozen and check themselves on construction, raising ``ValueError``
that names the offending field.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from domain.geo import LatLng
from domain.rules import (
    CLOCK_FIELDS,
    FINITE,
    LATE_WEIGHT,
    MAX_CLOCK_SPAN_S,
    ORDER,
    RIDER,
    ROUTE_STOPS,
    clock_span,
    distinct,
    load_fits,
)

_ORDER_RULES = tuple(ORDER.items())


class StopKind(StrEnum):
    PICKUP = "pickup"
    DROPOFF = "dropoff"


@dataclass(frozen=True, slots=True)
class Order:
    """A delivery: collect food at ``pickup`` once it is ready, bring it to ``dropoff``.

    created_at, ready_at, promised_at : seconds on the round's clock.
    size : capacity units the order takes in a rider's box (>= ``MIN_BOX_UNITS``).
    pickup_service_s, dropoff_service_s : time spent at each stop, seconds.
    item_counts : how many of each menu item the order holds, in the ETR model's menu order
        (``etr.features.N_MENU_ITEMS`` entries; empty when unknown, read as zeros).
    """

    id: str
    pickup: LatLng
    dropoff: LatLng
    created_at: float
    ready_at: float
    promised_at: float
    size: float = 1.0
    items: int = 1
    pickup_service_s: float = 0.0
    dropoff_service_s: float = 0.0
    item_counts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        # One test for a valid order (a served round builds hundreds); the checks below run
        # only to say what is wrong.
        if (
            self.id
            and all(rule.holds(getattr(self, name)) for name, rule in _ORDER_RULES)
            and self.created_at <= self.promised_at
            and self.items >= 0
            and (not self.item_counts or min(self.item_counts) >= 0)
        ):
            return
        if not self.id:
            raise ValueError("order id must be a non-empty string")
        if any(c < 0 for c in self.item_counts):
            raise ValueError("item_counts must be >= 0")
        if self.items < 0:
            raise ValueError(f"items must be >= 0, got {self.items!r}")
        for name, rule in _ORDER_RULES:
            rule.check(name, getattr(self, name))
        raise ValueError(
            f"promised_at ({self.promised_at}) is before created_at ({self.created_at})"
        )


@dataclass(frozen=True, slots=True)
class Stop:
    """One visit of a route: the pickup or the drop-off of an order."""

    order_id: str
    kind: StopKind


@dataclass(frozen=True, slots=True)
class Route:
    """Stops in visiting order, starting from the rider's current position."""

    stops: tuple[Stop, ...] = ()

    def __len__(self) -> int:
        return len(self.stops)

    def __iter__(self) -> Iterator[Stop]:
        return iter(self.stops)


class RouteTable(Mapping[str, "Route"]):
    """Routes by rider id, held as columns: a ``Route`` and its ``Stop`` objects are built when
    a caller asks for that rider's route (a 5000 x 2000 plan holds ~16,000 stops, and most
    callers encode or count them rather than read them one by one).

    rider_ids : the K riders, in order; starts : K + 1 offsets into the stop columns (rider k's
    stops are ``starts[k]:starts[k + 1]``); order_ids, pickup : per stop, its order's id and
    whether it is the pickup (else the drop-off). Compares equal to a dict of the same routes.
    """

    __slots__ = ("_at", "_built", "_order_ids", "_pickup", "_rider_ids", "_starts")

    def __init__(
        self,
        rider_ids: list[str],
        starts: list[int],
        order_ids: list[str],
        pickup: list[bool],
    ) -> None:
        if len(starts) != len(rider_ids) + 1 or len(order_ids) != len(pickup):
            raise ValueError("starts needs one offset per rider and one more; one kind per stop")
        self._rider_ids, self._starts = rider_ids, starts
        self._order_ids, self._pickup = order_ids, pickup
        self._at = dict(zip(rider_ids, range(len(rider_ids)), strict=True))
        self._built: dict[str, Route] = {}

    def __getitem__(self, rider_id: str) -> Route:
        route = self._built.get(rider_id)
        if route is None:
            k = self._at[rider_id]
            lo, hi = self._starts[k], self._starts[k + 1]
            kinds = (StopKind.PICKUP if p else StopKind.DROPOFF for p in self._pickup[lo:hi])
            route = Route(tuple(map(Stop, self._order_ids[lo:hi], kinds)))
            self._built[rider_id] = route
        return route

    def __iter__(self) -> Iterator[str]:
        return iter(self._rider_ids)

    def __len__(self) -> int:
        return len(self._rider_ids)

    def stop_columns(self) -> Iterator[tuple[str, list[str], list[bool]]]:
        """(rider id, its stops' order ids, their pickup flags) per rider, in order, building
        no ``Stop``: what an encoder writes from."""
        starts, ids, pickup = self._starts, self._order_ids, self._pickup
        for k, rider_id in enumerate(self._rider_ids):
            yield rider_id, ids[starts[k] : starts[k + 1]], pickup[starts[k] : starts[k + 1]]

    def columns(self) -> tuple[list[str], list[int], list[str], list[bool]]:
        """(rider_ids, starts, order_ids, pickup), as given: what an encoder writes from."""
        return self._rider_ids, self._starts, self._order_ids, self._pickup

    @staticmethod
    def of(routes: Mapping[str, Route]) -> RouteTable:
        """``routes`` as a table (itself where it is one)."""
        if isinstance(routes, RouteTable):
            return routes
        starts, order_ids, pickup = [0], [], []
        for route in routes.values():
            order_ids += [s.order_id for s in route.stops]
            pickup += [s.kind is StopKind.PICKUP for s in route.stops]
            starts.append(len(order_ids))
        return RouteTable(list(routes), starts, order_ids, pickup)

    def __reduce__(self) -> tuple[Any, ...]:
        return RouteTable, (self._rider_ids, self._starts, self._order_ids, self._pickup)


@dataclass(frozen=True, slots=True)
class Rider:
    """A courier with a current position and the route it is committed to.

    speed_mps : travel speed, metres per second (>= MIN_SPEED_MPS; slower would round to 0 in the
        kernels' float32 and make every travel time infinite).
    capacity : box capacity in the orders' size units (>= ``MIN_BOX_UNITS``).
    orders : the orders on ``route`` (each one's pickup and drop-off, or only the drop-off when the
        order is in ``picked_up``).
    available_at : when the rider can leave ``position`` (seconds, round clock); ``None`` = now.
    """

    id: str
    position: LatLng
    speed_mps: float
    capacity: float
    route: Route = Route()
    orders: tuple[Order, ...] = ()
    picked_up: frozenset[str] = frozenset()
    available_at: float | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("rider id must be a non-empty string")
        RIDER["speed_mps"].check(f"rider {self.id}: speed_mps", self.speed_mps)
        RIDER["capacity"].check(f"rider {self.id}: capacity", self.capacity)
        if self.available_at is not None:
            RIDER["available_at"].check(f"rider {self.id}: available_at", self.available_at)
        self._check_route()

    def _check_route(self) -> None:
        by_id = {o.id: o for o in self.orders}
        if not distinct([o.id for o in self.orders]):
            raise ValueError(f"rider {self.id}: duplicate order ids in orders")
        unknown = self.picked_up - by_id.keys()
        if unknown:
            raise ValueError(
                f"rider {self.id}: picked_up names {len(unknown)} unknown orders, e.g. "
                f"{sorted(unknown)[:5]}"
            )
        seen: dict[str, list[StopKind]] = {oid: [] for oid in by_id}
        for stop in self.route.stops:
            if stop.order_id not in by_id:
                raise ValueError(f"rider {self.id}: route stop for unknown order {stop.order_id}")
            seen[stop.order_id].append(stop.kind)
        for oid, kinds in seen.items():
            want = list(ROUTE_STOPS[oid in self.picked_up])
            if kinds != want:
                raise ValueError(
                    f"rider {self.id}: order {oid} must appear on the route as "
                    f"{want}, got {[k.value for k in kinds]}"
                )
        if not load_fits(self.onboard_load, self.capacity):
            raise ValueError(
                f"rider {self.id}: picked-up load {self.onboard_load} exceeds capacity "
                f"{self.capacity}"
            )

    @property
    def onboard_load(self) -> float:
        """Capacity units already in the box (orders picked up, not yet delivered)."""
        return sum(o.size for o in self.orders if o.id in self.picked_up)


@dataclass(frozen=True, slots=True)
class DispatchWeights:
    """How a round prices a plan.

    late_weight : seconds of travel one second of lateness is worth (>= 0).
    max_lateness_s : hard limit on any drop-off's lateness, seconds; a placement that makes some
        drop-off later than this (and later than it already was) is infeasible. ``inf`` = no limit.
    max_orders_per_rider : at most this many new orders go to one rider in a round (>= 1).
    candidate_riders : when set, each order may only go to its this-many nearest riders (by
        straight-line distance to the pickup): a restriction that changes plans (orders
        compete for the same near riders, so a fixed K can cost many times the unrestricted
        plan), not a speed-up; ``None`` considers every rider, exactly and without pricing
        every pair (docs/round.md).
    etr_floor : price each drop-off no earlier than the ETR model's prediction (where a round
        runs with the model: the served pipeline, or ``etr_minutes`` given); False plans on
        travel times alone and the served pipeline skips the ETR call.
    max_route_stops : a route may hold at most this many stops after the round: a rider whose
        route would pass it gets no further order (None: no limit). The served pipeline sets
        it to its ``max_route_stops`` limit, so a plan is always a valid next request.
    """

    late_weight: float = 4.0
    max_lateness_s: float = 1800.0
    max_orders_per_rider: int = 1
    candidate_riders: int | None = None
    etr_floor: bool = True
    max_route_stops: int | None = None

    def __post_init__(self) -> None:
        LATE_WEIGHT.check("late_weight", self.late_weight)
        if math.isnan(self.max_lateness_s) or self.max_lateness_s < 0:
            raise ValueError(f"max_lateness_s must be >= 0, got {self.max_lateness_s!r}")
        if self.max_orders_per_rider < 1:
            raise ValueError(
                f"max_orders_per_rider must be >= 1, got {self.max_orders_per_rider!r}"
            )
        if self.candidate_riders is not None and self.candidate_riders < 1:
            raise ValueError(f"candidate_riders must be >= 1, got {self.candidate_riders!r}")
        if self.max_route_stops is not None and self.max_route_stops < 2:
            raise ValueError(f"max_route_stops must be >= 2, got {self.max_route_stops!r}")


@dataclass(frozen=True, slots=True)
class DispatchRound:
    """One dispatch decision: give ``orders`` (new, unassigned) to ``riders`` at time ``now``."""

    now: float
    riders: tuple[Rider, ...]
    orders: tuple[Order, ...]
    weights: DispatchWeights = DispatchWeights()

    def __post_init__(self) -> None:
        FINITE.check("now", self.now)
        if not distinct([r.id for r in self.riders]):
            raise ValueError("rider ids must be unique within a round")
        order_ids = [o.id for o in self.orders]
        if not distinct(order_ids):
            raise ValueError("new order ids must be unique within a round")
        carried = Counter(o.id for r in self.riders for o in r.orders)
        twice = sorted(oid for oid, n in carried.items() if n > 1)
        if twice:  # each rider's own orders are unique: these are on two riders' routes
            raise ValueError(f"orders carried by more than one rider: {twice[:5]}")
        clash = carried.keys() & set(order_ids)
        if clash:
            raise ValueError(f"new orders already on a rider's route: {sorted(clash)[:5]}")
        self._check_clock()

    def _check_clock(self) -> None:
        """Every time of the round within ``MAX_CLOCK_SPAN_S`` of ``now`` (ValueError naming
        the first that is not)."""
        span = clock_span(self.now)
        every = (*self.orders, *(o for r in self.riders for o in r.orders))
        times = [t for o in every for t in (o.created_at, o.ready_at, o.promised_at)]
        times += [r.available_at for r in self.riders if r.available_at is not None]
        # The types' own checks made every time finite: the extremes decide.
        if not times or (span.holds(min(times)) and span.holds(max(times))):
            return
        for o in every:  # only to say which one
            for name in CLOCK_FIELDS[:3]:
                t = getattr(o, name)
                if not span.holds(t):
                    raise ValueError(
                        f"order {o.id}: {name} {t!r} is more than {MAX_CLOCK_SPAN_S:.0f} s "
                        f"from the round's now ({self.now!r})"
                    )
        for r in self.riders:
            if r.available_at is not None and not span.holds(r.available_at):
                raise ValueError(
                    f"rider {r.id}: available_at {r.available_at!r} is more than "
                    f"{MAX_CLOCK_SPAN_S:.0f} s from the round's now ({self.now!r})"
                )


class UnassignedReason(StrEnum):
    NO_RIDERS = "no_riders"
    """The round has no riders."""
    INFEASIBLE = "infeasible"
    """No rider can take the order within its capacity and the lateness limit."""
    RIDER_LIMIT = "rider_limit"
    """Feasible riders exist, but each was given other orders (max_orders_per_rider)."""


@dataclass(frozen=True, slots=True)
class Assignment:
    """An order given to a rider; ``cost`` in weighted seconds (travel + late_weight x lateness)."""

    order_id: str
    rider_id: str
    cost: float


@dataclass(frozen=True, slots=True)
class Unassigned:
    order_id: str
    reason: UnassignedReason


@dataclass(frozen=True, slots=True)
class CostBreakdown:
    """What the plan adds to the riders' routes.

    travel_s : added driving time, seconds.
    lateness_s : added lateness summed over every drop-off on the changed routes, seconds.
    total : travel_s + late_weight x lateness_s.
    """

    travel_s: float
    lateness_s: float
    total: float


@dataclass(frozen=True, slots=True)
class DispatchPlan:
    """The result of a round.

    routes : the new route of every rider whose route changed.
    predicted_arrival : for every order on a changed route, the planned arrival at its drop-off
        (seconds, round clock).
    etr_arrival : for every new order, created_at + the ETR model's predicted minutes (seconds,
        round clock); empty when the round ran without the ETR model.
    etr_model_version : the ETR model version that computed etr_arrival (None: no ETR call).
    timings_ms : wall time per stage, milliseconds.
    backend, solved_by : the array backend the solve ran on, and the replica that ran it
        (empty in-process).
    """

    assignments: tuple[Assignment, ...]
    routes: Mapping[str, Route]
    predicted_arrival: Mapping[str, float]
    cost: CostBreakdown
    unassigned: tuple[Unassigned, ...]
    backend: str = "numpy"
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    etr_arrival: Mapping[str, float] = field(default_factory=dict)
    solved_by: str = ""
    etr_model_version: str | None = None
