"""HTTP request and response models, converted to and from the domain types here only.

Validation happens at the edge: unknown fields, wrong types, NaN/inf, negative times and
out-of-range values are 422 with the field's path; a request that breaks a domain rule (a route
that does not match its orders) is 422 naming the rider.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    model_validator,
)

from domain import (
    DispatchPlan,
    DispatchRound,
    DispatchWeights,
    LatLng,
    Order,
    OrderColumns,
    Rider,
    Route,
    RouteTable,
    Stop,
    StopKind,
    bounds,
)
from etr import Prediction
from planner.pdptw.instance import PdptwInstance, PdptwInstanceError, build_instance
from serve_app.config import Limits
from serve_app.pipeline.dispatch import SolveCall
from serve_app.pipeline.errors import InvalidInput, TooLarge
from serve_app.pipeline.round_source import RoundSource

Id = Annotated[str, Field(min_length=bounds.ID_LENGTH[0], max_length=bounds.ID_LENGTH[1])]
Seconds = Annotated[
    float,
    Field(
        ge=bounds.TIME_S[0],
        le=bounds.TIME_S[1],
        allow_inf_nan=False,
        description="Seconds (e.g. Unix time).",
    ),
]
Duration = Annotated[
    float, Field(ge=bounds.DURATION_S[0], le=bounds.DURATION_S[1], allow_inf_nan=False)
]
_ORDER = bounds.defaults(Order)
_WEIGHTS = bounds.defaults(DispatchWeights)
M = TypeVar("M", bound=BaseModel)


class _Model(BaseModel):
    # strict: a JSON true is not 1, "3" is not 3; ints are accepted where floats are meant.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class Position(_Model):
    lat: float = Field(
        ge=bounds.LATITUDE[0], le=bounds.LATITUDE[1], description="Latitude, degrees (WGS-84)."
    )
    lng: float = Field(
        ge=bounds.LONGITUDE[0], le=bounds.LONGITUDE[1], description="Longitude, degrees (WGS-84)."
    )

    def to_domain(self) -> LatLng:
        return LatLng(self.lat, self.lng)


class OrderIn(_Model):
    id: Id
    pickup: Position
    dropoff: Position
    created_at: Seconds
    ready_at: Seconds = Field(description="When the food is ready, Unix seconds.")
    promised_at: Seconds = Field(description="Promised delivery time, Unix seconds.")
    size: float = Field(
        _ORDER["size"],
        ge=bounds.ORDER_SIZE[0],
        le=bounds.ORDER_SIZE[1],
        description="Capacity units in the rider's box.",
    )
    items: int = Field(_ORDER["items"], ge=bounds.COUNT[0], le=bounds.COUNT[1])
    item_counts: list[Annotated[int, Field(ge=bounds.COUNT[0], le=bounds.COUNT[1])]] = Field(
        default_factory=list,
        max_length=bounds.MAX_ITEM_KINDS,
        fail_fast=True,
        description="Per menu item counts (ETR features).",
    )
    pickup_service_s: Duration = _ORDER["pickup_service_s"]
    dropoff_service_s: Duration = _ORDER["dropoff_service_s"]

    @model_validator(mode="after")
    def _promise_after_creation(self) -> OrderIn:
        if self.promised_at < self.created_at:
            raise ValueError("promised_at must not be before created_at")
        return self

    def to_domain(self) -> Order:
        pickup, dropoff = self.pickup, self.dropoff
        return Order(
            id=self.id,
            pickup=LatLng(pickup.lat, pickup.lng),
            dropoff=LatLng(dropoff.lat, dropoff.lng),
            created_at=self.created_at,
            ready_at=self.ready_at,
            promised_at=self.promised_at,
            size=self.size,
            items=self.items,
            pickup_service_s=self.pickup_service_s,
            dropoff_service_s=self.dropoff_service_s,
            item_counts=tuple(self.item_counts),
        )

    @classmethod
    def from_domain(cls, o: Order) -> OrderIn:
        return cls.model_validate(order_fields(o))


class StopIn(_Model):
    order_id: Id
    kind: StopKind = Field(strict=False, description='"pickup" or "dropoff".')


class RiderIn(_Model):
    id: Id
    position: Position
    speed_mps: float = Field(
        ge=bounds.RIDER_SPEED_MPS[0],
        le=bounds.RIDER_SPEED_MPS[1],
        description="Travel speed, metres per second.",
    )
    capacity: float = Field(
        ge=bounds.RIDER_CAPACITY[0],
        le=bounds.RIDER_CAPACITY[1],
        description="Box capacity, order size units.",
    )
    route: list[StopIn] = Field(
        default_factory=list, fail_fast=True, description="Committed stops, in order."
    )
    orders: list[OrderIn] = Field(
        default_factory=list, fail_fast=True, description="The orders on the route."
    )
    picked_up: list[Id] = Field(
        default_factory=list, fail_fast=True, description="Orders already on board."
    )
    available_at: Seconds | None = None

    def to_domain(self) -> Rider:
        return Rider(
            id=self.id,
            position=LatLng(self.position.lat, self.position.lng),
            speed_mps=self.speed_mps,
            capacity=self.capacity,
            route=Route(tuple(Stop(s.order_id, s.kind) for s in self.route)),
            orders=tuple(o.to_domain() for o in self.orders),
            picked_up=frozenset(self.picked_up),
            available_at=self.available_at,
        )

    @classmethod
    def from_domain(cls, r: Rider) -> RiderIn:
        return cls.model_validate(rider_fields(r))


#: ``DispatchWeights`` fields the server sets itself, from its configuration (the stop limit
#: is ``limits.max_route_stops``): not part of a request.
SERVER_SET_WEIGHTS = frozenset({"max_route_stops"})


def _api_weights(w: DispatchWeights) -> dict[str, object]:
    """Every field a request may carry (all but ``SERVER_SET_WEIGHTS``), so none is dropped."""
    return {k: v for k, v in dataclasses.asdict(w).items() if k not in SERVER_SET_WEIGHTS}


class WeightsIn(_Model):
    late_weight: float = Field(
        _WEIGHTS["late_weight"],
        ge=bounds.LATE_WEIGHT[0],
        le=bounds.LATE_WEIGHT[1],
        description="Travel seconds per late second.",
    )
    max_lateness_s: float = Field(
        _WEIGHTS["max_lateness_s"],
        ge=bounds.MAX_LATENESS_S[0],
        le=bounds.MAX_LATENESS_S[1],
        description="Hard lateness limit.",
    )
    max_orders_per_rider: int = Field(
        _WEIGHTS["max_orders_per_rider"],
        ge=bounds.MAX_ORDERS_PER_RIDER[0],
        le=bounds.MAX_ORDERS_PER_RIDER[1],
    )
    candidate_riders: int | None = Field(
        _WEIGHTS["candidate_riders"],
        ge=bounds.MIN_CANDIDATE_RIDERS,
        description="Restrict each order to its K nearest riders (changes plans; unset "
        "considers every rider, exactly).",
    )
    etr_floor: bool = Field(
        _WEIGHTS["etr_floor"],
        description="Price drop-offs no earlier than the ETR model says; false skips it.",
    )

    def to_domain(self) -> DispatchWeights:
        return DispatchWeights(**self.model_dump())


class DispatchRequest(_Model):
    """A round as the API takes it (``to_source``: as the pipeline takes it)."""

    now: Seconds = Field(description="The round's time, Unix seconds.")
    riders: list[RiderIn] = Field(fail_fast=True)
    orders: list[OrderIn] = Field(fail_fast=True)
    weights: WeightsIn = Field(default_factory=WeightsIn)
    utc_offset_s: float = Field(
        0.0, ge=bounds.UTC_OFFSET_S[0], le=bounds.UTC_OFFSET_S[1], description="Local time for ETR."
    )
    _orders: tuple[Order, ...] | None = PrivateAttr(None)

    def new_orders(self) -> tuple[Order, ...]:
        """The new orders as domain types (built once); InvalidInput naming a bad one."""
        if self._orders is None:
            orders = []
            for k, o in enumerate(self.orders):
                try:
                    orders.append(o.to_domain())
                except ValueError as exc:
                    raise InvalidInput.at(("body", "orders", k), str(exc)) from exc
            self._orders = tuple(orders)
        return self._orders

    def to_source(self) -> RoundSource:
        """The round as the pipeline takes it: the new orders built now, the riders when it
        is packed; each raises ``InvalidInput`` naming the order or rider that breaks a
        domain rule."""
        longest = max((len(r.route) for r in self.riders), default=0)
        return RoundSource(
            self.now,
            self.utc_offset_s,
            OrderColumns.of(self.new_orders()),
            self.weights.to_domain(),
            (len(self.riders), longest),
            lambda: self.to_domain().riders,
        )

    def to_domain(self) -> DispatchRound:
        """The whole round; InvalidInput naming the rider or order that breaks a domain rule."""
        orders = self.new_orders()
        riders = []
        for k, r in enumerate(self.riders):
            try:
                riders.append(r.to_domain())
            except ValueError as exc:
                raise InvalidInput.at(("body", "riders", k), str(exc)) from exc
        try:
            return DispatchRound(self.now, tuple(riders), orders, self.weights.to_domain())
        except ValueError as exc:
            raise InvalidInput.at(("body",), str(exc)) from exc

    @classmethod
    def from_domain(cls, r: DispatchRound, utc_offset_s: float = 0.0) -> DispatchRequest:
        return cls.model_validate(round_fields(r, utc_offset_s))


# A domain value in the request's JSON shape, as plain values (None fields left out, as
# ``model_dump(exclude_none=True)`` leaves them): the one mapping from the domain to the wire,
# which the models validate (``from_domain``) and the clients send as they are (a 5000-rider
# round without building a model of it: a protobuf message or JSON straight from these).
def order_fields(o: Order) -> dict[str, Any]:
    return {
        "id": o.id,
        "pickup": {"lat": o.pickup.lat, "lng": o.pickup.lng},
        "dropoff": {"lat": o.dropoff.lat, "lng": o.dropoff.lng},
        "created_at": o.created_at,
        "ready_at": o.ready_at,
        "promised_at": o.promised_at,
        "size": o.size,
        "items": o.items,
        "item_counts": list(o.item_counts),
        "pickup_service_s": o.pickup_service_s,
        "dropoff_service_s": o.dropoff_service_s,
    }


def rider_fields(r: Rider) -> dict[str, Any]:
    fields = {
        "id": r.id,
        "position": {"lat": r.position.lat, "lng": r.position.lng},
        "speed_mps": r.speed_mps,
        "capacity": r.capacity,
        "route": [{"order_id": s.order_id, "kind": str(s.kind)} for s in r.route.stops],
        "orders": [order_fields(o) for o in r.orders],
        "picked_up": sorted(r.picked_up),
    }
    if r.available_at is not None:
        fields["available_at"] = r.available_at
    return fields


def round_fields(r: DispatchRound, utc_offset_s: float = 0.0) -> dict[str, Any]:
    return {
        "now": r.now,
        "riders": [rider_fields(x) for x in r.riders],
        "orders": [order_fields(o) for o in r.orders],
        "weights": {k: v for k, v in _api_weights(r.weights).items() if v is not None},
        "utc_offset_s": utc_offset_s,
    }


class AssignmentOut(_Model):
    order_id: str
    rider_id: str
    cost: float = Field(description="Weighted seconds: added travel + late_weight x lateness.")


class ArrivalOut(_Model):
    planned_s: float = Field(description="OR schedule's arrival at the drop-off, Unix seconds.")
    etr_s: float | None = Field(None, description="created_at + ETR model minutes, Unix seconds.")


class UnassignedOut(_Model):
    order_id: str
    reason: Literal["no_riders", "infeasible", "rider_limit"]


class CostOut(_Model):
    travel_s: float
    lateness_s: float
    total: float


class DispatchResponse(_Model):
    assignments: list[AssignmentOut]
    routes: dict[str, list[StopIn]]
    arrivals: dict[str, ArrivalOut]
    cost: CostOut
    unassigned: list[UnassignedOut]
    backend: str
    solved_by: str = Field("", description="The solver replica that planned the round.")
    model_version: str | None = Field(
        None, description="The ETR model version behind arrivals' etr_s (null: no ETR call)."
    )
    timings_ms: dict[str, float]


_KIND = {True: StopKind.PICKUP.value, False: StopKind.DROPOFF.value}


def _routes_to_dict(routes: Mapping[str, Route]) -> dict[str, list[dict[str, str]]]:
    """Routes as ``DispatchResponse``'s JSON form; from a ``RouteTable``'s columns where the
    plan holds one (no ``Stop`` objects built to be read once)."""
    return {
        rid: [{"order_id": oid, "kind": _KIND[p]} for oid, p in zip(ids, pickup, strict=True)]
        for rid, ids, pickup in RouteTable.of(routes).stop_columns()
    }


def plan_to_dict(plan: DispatchPlan) -> dict[str, Any]:
    """A plan as ``DispatchResponse``'s JSON form, built directly (no models in between: this
    is the hot path of every dispatch answer; a test holds it equal to the model's dump)."""
    etr = plan.etr_arrival
    return {
        "assignments": [
            {"order_id": a.order_id, "rider_id": a.rider_id, "cost": a.cost}
            for a in plan.assignments
        ],
        "routes": _routes_to_dict(plan.routes),
        "arrivals": {
            oid: {"planned_s": t, "etr_s": etr.get(oid)}
            for oid, t in plan.predicted_arrival.items()
        },
        **plan_summary(plan),
    }


def plan_summary(plan: DispatchPlan) -> dict[str, Any]:
    """The answer's small fields, in ``plan_to_dict``'s form and order (what the answer writers
    that lay out the big ones from the plan's columns add to them)."""
    return {
        "cost": {
            "travel_s": plan.cost.travel_s,
            "lateness_s": plan.cost.lateness_s,
            "total": plan.cost.total,
        },
        "unassigned": [{"order_id": u.order_id, "reason": u.reason.value} for u in plan.unassigned],
        "backend": plan.backend,
        "solved_by": plan.solved_by,
        "model_version": plan.etr_model_version,
        "timings_ms": dict(plan.timings_ms),
    }


def prediction_to_dict(got: Prediction) -> dict[str, Any]:
    """An ETR answer as ``EtrResponse``'s JSON form."""
    return {"minutes": got.minutes.tolist(), "model_version": got.model_version}


class EtrRequest(_Model):
    orders: list[OrderIn] = Field(min_length=1, fail_fast=True)
    utc_offset_s: float = Field(
        0.0, ge=bounds.UTC_OFFSET_S[0], le=bounds.UTC_OFFSET_S[1], description="Local time offset."
    )


class EtrResponse(_Model):
    minutes: list[float] = Field(description="Predicted minutes from creation to delivery.")
    model_version: str = Field(description="The model version that computed every minute.")


#: Bounds of a static solve's numbers. The kernels price in float32, so coordinates, times and
#: loads stay far inside its exact range, and no sum of demands can wrap an int64.
MAX_SOLVE_COORD = 1e6
MAX_SOLVE_TIME = 1e7
MAX_CAPACITY = 1_000_000
MAX_TASK_ID = 1_000_000


class TaskIn(_Model):
    """One Li & Lim task; task 0 is the depot (its window is the planning horizon)."""

    id: int = Field(ge=0, le=MAX_TASK_ID)
    x: float = Field(ge=-MAX_SOLVE_COORD, le=MAX_SOLVE_COORD)
    y: float = Field(ge=-MAX_SOLVE_COORD, le=MAX_SOLVE_COORD)
    demand: int = Field(
        ge=-MAX_CAPACITY,
        le=MAX_CAPACITY,
        description="> 0 pickup, < 0 delivery, 0 only for the depot.",
    )
    earliest: float = Field(ge=0, le=MAX_SOLVE_TIME)
    latest: float = Field(ge=0, le=MAX_SOLVE_TIME)
    service: float = Field(0.0, ge=0, le=MAX_SOLVE_TIME)
    pickup_index: int = Field(0, ge=0, le=MAX_TASK_ID, description="For a delivery: its pickup.")
    delivery_index: int = Field(
        0, ge=0, le=MAX_TASK_ID, description="For a pickup: its delivery's id."
    )


class SolveRequest(_Model):
    """A static PDPTW instance (the JSON form of a Li & Lim file) and the solver's budget."""

    name: str = Field("instance", min_length=1, max_length=128)
    vehicles: int = Field(ge=1, le=1000)
    capacity: int = Field(ge=1, le=MAX_CAPACITY)
    tasks: list[TaskIn] = Field(
        min_length=3, fail_fast=True, description="At most limits.max_tasks, the depot included."
    )
    time_limit_s: float = Field(
        5.0,
        gt=0,
        le=120,
        description="Solver time, seconds; within the request's deadline (x-timeout-ms).",
    )
    seed: int = Field(0, ge=0, le=2**32 - 1)

    @classmethod
    def from_instance(
        cls, instance: PdptwInstance, time_limit_s: float = 5.0, seed: int = 0
    ) -> SolveRequest:
        """The request for a parsed Li & Lim instance (``planner.pdptw.load_instance``)."""
        delivery_of = {int(p): int(d) for p, d in instance.pairs}
        pickup_of = {d: p for p, d in delivery_of.items()}
        tasks = [
            TaskIn(
                id=k,
                x=float(instance.xy[k, 0]),
                y=float(instance.xy[k, 1]),
                demand=int(instance.demand[k]),
                earliest=float(instance.earliest[k]),
                latest=float(instance.latest[k]),
                service=float(instance.service[k]),
                pickup_index=pickup_of.get(k, 0),
                delivery_index=delivery_of.get(k, 0),
            )
            for k in range(len(instance.demand))
        ]
        return cls(
            name=instance.name,
            vehicles=instance.vehicles,
            capacity=instance.capacity,
            tasks=tasks,
            time_limit_s=time_limit_s,
            seed=seed,
        )

    def to_call(self) -> SolveCall:
        """The pipeline's call: the instance validated (InvalidInput naming the task)."""
        rows = [
            (
                t.id,
                t.x,
                t.y,
                t.demand,
                t.earliest,
                t.latest,
                t.service,
                t.pickup_index,
                t.delivery_index,
            )
            for t in self.tasks
        ]
        try:
            instance = build_instance(
                self.name, self.vehicles, self.capacity, rows, lambda k: f"tasks[{k}]"
            )
        except PdptwInstanceError as exc:
            raise InvalidInput.at(("body", "tasks", exc.row or 0), exc.reason) from exc
        return SolveCall(instance, self.time_limit_s, self.seed, self.model_dump(exclude={"name"}))


class SolveResponse(_Model):
    instance: str
    vehicles: int
    distance: float
    feasible: bool
    seconds: float
    routes: list[list[int]] = Field(description="Task ids per vehicle, depot omitted.")
    unassigned: list[int] = Field(
        default_factory=list,
        description="Tasks not placed when the time limit came (the answer is then not "
        "feasible): a limit too short for the instance's first construction.",
    )
    cached: bool = False


class FaultRequest(_Model):
    """Drills only (``resilience.replicas.fault_injection``): which deployment, which fault."""

    deployment: Literal["OrSolver", "Etr"]
    kind: Literal["poison", "hang", "crash"]


# ---- request models bounded by the configured limits ---------------------------------------


@dataclasses.dataclass(frozen=True)
class RequestModels:
    """The request models an ingress validates with: the schemas above, every list bounded by
    the configured ``Limits``. pydantic-core counts a list's elements as it validates them and
    stops at the first one past its bound (and, with ``fail_fast``, at the first bad one), so
    the work and memory of validating a request are bounded by the limits, whatever its body.
    A list past its bound fails as ``too_long``; ``too_large`` turns that into the 413."""

    dispatch: type[DispatchRequest]
    etr: type[EtrRequest]
    etr_bulk: type[EtrRequest]
    solve: type[SolveRequest]

    @staticmethod
    @functools.cache
    def for_limits(limits: Limits) -> RequestModels:
        stops = limits.max_route_stops
        rider = _bounded(RiderIn, route=stops, orders=stops, picked_up=stops)
        return RequestModels(
            dispatch=_bounded(
                DispatchRequest,
                riders=(limits.max_riders, rider),
                orders=limits.max_orders,
            ),
            etr=_bounded(EtrRequest, orders=limits.max_orders),
            etr_bulk=_bounded(EtrRequest, orders=limits.max_bulk_orders),
            solve=_bounded(SolveRequest, tasks=limits.max_tasks),
        )

    @staticmethod
    def check_lengths(obj: Any, model: type[BaseModel], loc: tuple[str | int, ...] = ()) -> None:
        """Raise the 413 for the first list of ``obj`` longer than ``model`` allows, before
        anything else is read of it. ``obj`` has the model's list fields as sequences (a
        protobuf message: its repeated fields are counted without being converted)."""
        for name, info in model.model_fields.items():
            bound = _max_length(info)
            if bound is None:
                continue
            items = getattr(obj, name)
            here = (*loc, name)
            if len(items) > bound:
                what = _LIMITED.get(_shape_of(here), ".".join(map(str, here)))
                raise TooLarge(what, len(items), bound)
            item = _bounded_item_model(info)
            if item is not None:
                for k, element in enumerate(items):
                    RequestModels.check_lengths(element, item, (*here, k))

    @staticmethod
    def too_large(exc: ValidationError) -> TooLarge | None:
        """The 413 for the first list of ``exc`` past a configured limit, or None."""
        for e in exc.errors(include_url=False, include_input=False):
            what = _LIMITED.get(_shape_of(e.get("loc", ())))
            if e.get("type") == "too_long" and what is not None:
                ctx = e.get("ctx", {})
                return TooLarge(what, int(ctx["actual_length"]), int(ctx["max_length"]))
        return None


#: The bounded lists, by their path with indices as ``int``: the name a 413 gives each.
_LIMITED: dict[tuple[str | type, ...], str] = {
    ("riders",): "riders",
    ("orders",): "orders",
    ("tasks",): "tasks",
    ("riders", int, "route"): "route stops",
    ("riders", int, "orders"): "orders on a route",
    ("riders", int, "picked_up"): "picked-up orders",
}


def _max_length(info: Any) -> int | None:
    return next((m.max_length for m in info.metadata if hasattr(m, "max_length")), None)


def _bounded_item_model(info: Any) -> type[BaseModel] | None:
    """The element model of a list field, when some list inside it is bounded too."""
    args = getattr(info.annotation, "__args__", ())
    item = args[0] if len(args) == 1 else None
    bounded = (
        isinstance(item, type)
        and issubclass(item, BaseModel)
        and any(_max_length(f) is not None for f in item.model_fields.values())
    )
    return item if bounded else None


def _shape_of(loc: tuple[str | int, ...]) -> tuple[str | type, ...]:
    return tuple(int if isinstance(p, int) else p for p in loc)


def _bounded(model: type[M], **bounds: int | tuple[int, type[BaseModel]]) -> type[M]:
    """``model`` with each named list field at most that many elements long (a bound may come
    with the bounded model of the list's elements); defaults and docs kept."""
    fields: dict[str, Any] = {}
    for name, bound in bounds.items():
        limit, item = bound if isinstance(bound, tuple) else (bound, None)
        info = model.model_fields[name]
        annotation = info.annotation if item is None else list[item]  # type: ignore[valid-type]
        fields[name] = (Annotated[annotation, Field(max_length=limit)], info)
    return create_model(model.__name__, __base__=model, **fields)  # type: ignore[call-overload]
