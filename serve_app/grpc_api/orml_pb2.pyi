from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Position(_message.Message):
    __slots__ = ("lat", "lng")
    LAT_FIELD_NUMBER: _ClassVar[int]
    LNG_FIELD_NUMBER: _ClassVar[int]
    lat: float
    lng: float
    def __init__(self, lat: _Optional[float] = ..., lng: _Optional[float] = ...) -> None: ...

class Order(_message.Message):
    __slots__ = ("id", "pickup", "dropoff", "created_at", "ready_at", "promised_at", "size", "items", "item_counts", "pickup_service_s", "dropoff_service_s")
    ID_FIELD_NUMBER: _ClassVar[int]
    PICKUP_FIELD_NUMBER: _ClassVar[int]
    DROPOFF_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    READY_AT_FIELD_NUMBER: _ClassVar[int]
    PROMISED_AT_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ITEM_COUNTS_FIELD_NUMBER: _ClassVar[int]
    PICKUP_SERVICE_S_FIELD_NUMBER: _ClassVar[int]
    DROPOFF_SERVICE_S_FIELD_NUMBER: _ClassVar[int]
    id: str
    pickup: Position
    dropoff: Position
    created_at: float
    ready_at: float
    promised_at: float
    size: float
    items: int
    item_counts: _containers.RepeatedScalarFieldContainer[int]
    pickup_service_s: float
    dropoff_service_s: float
    def __init__(self, id: _Optional[str] = ..., pickup: _Optional[_Union[Position, _Mapping]] = ..., dropoff: _Optional[_Union[Position, _Mapping]] = ..., created_at: _Optional[float] = ..., ready_at: _Optional[float] = ..., promised_at: _Optional[float] = ..., size: _Optional[float] = ..., items: _Optional[int] = ..., item_counts: _Optional[_Iterable[int]] = ..., pickup_service_s: _Optional[float] = ..., dropoff_service_s: _Optional[float] = ...) -> None: ...

class Stop(_message.Message):
    __slots__ = ("order_id", "kind")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    kind: str
    def __init__(self, order_id: _Optional[str] = ..., kind: _Optional[str] = ...) -> None: ...

class Rider(_message.Message):
    __slots__ = ("id", "position", "speed_mps", "capacity", "route", "orders", "picked_up", "available_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    SPEED_MPS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ROUTE_FIELD_NUMBER: _ClassVar[int]
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    PICKED_UP_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    position: Position
    speed_mps: float
    capacity: float
    route: _containers.RepeatedCompositeFieldContainer[Stop]
    orders: _containers.RepeatedCompositeFieldContainer[Order]
    picked_up: _containers.RepeatedScalarFieldContainer[str]
    available_at: float
    def __init__(self, id: _Optional[str] = ..., position: _Optional[_Union[Position, _Mapping]] = ..., speed_mps: _Optional[float] = ..., capacity: _Optional[float] = ..., route: _Optional[_Iterable[_Union[Stop, _Mapping]]] = ..., orders: _Optional[_Iterable[_Union[Order, _Mapping]]] = ..., picked_up: _Optional[_Iterable[str]] = ..., available_at: _Optional[float] = ...) -> None: ...

class Weights(_message.Message):
    __slots__ = ("late_weight", "max_lateness_s", "max_orders_per_rider", "candidate_riders", "etr_floor")
    LATE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MAX_LATENESS_S_FIELD_NUMBER: _ClassVar[int]
    MAX_ORDERS_PER_RIDER_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_RIDERS_FIELD_NUMBER: _ClassVar[int]
    ETR_FLOOR_FIELD_NUMBER: _ClassVar[int]
    late_weight: float
    max_lateness_s: float
    max_orders_per_rider: int
    candidate_riders: int
    etr_floor: bool
    def __init__(self, late_weight: _Optional[float] = ..., max_lateness_s: _Optional[float] = ..., max_orders_per_rider: _Optional[int] = ..., candidate_riders: _Optional[int] = ..., etr_floor: _Optional[bool] = ...) -> None: ...

class DispatchRequest(_message.Message):
    __slots__ = ("now", "riders", "orders", "weights", "utc_offset_s")
    NOW_FIELD_NUMBER: _ClassVar[int]
    RIDERS_FIELD_NUMBER: _ClassVar[int]
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    UTC_OFFSET_S_FIELD_NUMBER: _ClassVar[int]
    now: float
    riders: _containers.RepeatedCompositeFieldContainer[Rider]
    orders: _containers.RepeatedCompositeFieldContainer[Order]
    weights: Weights
    utc_offset_s: float
    def __init__(self, now: _Optional[float] = ..., riders: _Optional[_Iterable[_Union[Rider, _Mapping]]] = ..., orders: _Optional[_Iterable[_Union[Order, _Mapping]]] = ..., weights: _Optional[_Union[Weights, _Mapping]] = ..., utc_offset_s: _Optional[float] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("order_id", "rider_id", "cost")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    RIDER_ID_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    rider_id: str
    cost: float
    def __init__(self, order_id: _Optional[str] = ..., rider_id: _Optional[str] = ..., cost: _Optional[float] = ...) -> None: ...

class Arrival(_message.Message):
    __slots__ = ("planned_s", "etr_s")
    PLANNED_S_FIELD_NUMBER: _ClassVar[int]
    ETR_S_FIELD_NUMBER: _ClassVar[int]
    planned_s: float
    etr_s: float
    def __init__(self, planned_s: _Optional[float] = ..., etr_s: _Optional[float] = ...) -> None: ...

class Unassigned(_message.Message):
    __slots__ = ("order_id", "reason")
    ORDER_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    order_id: str
    reason: str
    def __init__(self, order_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class Cost(_message.Message):
    __slots__ = ("travel_s", "lateness_s", "total")
    TRAVEL_S_FIELD_NUMBER: _ClassVar[int]
    LATENESS_S_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    travel_s: float
    lateness_s: float
    total: float
    def __init__(self, travel_s: _Optional[float] = ..., lateness_s: _Optional[float] = ..., total: _Optional[float] = ...) -> None: ...

class RouteStops(_message.Message):
    __slots__ = ("stops",)
    STOPS_FIELD_NUMBER: _ClassVar[int]
    stops: _containers.RepeatedCompositeFieldContainer[Stop]
    def __init__(self, stops: _Optional[_Iterable[_Union[Stop, _Mapping]]] = ...) -> None: ...

class DispatchResponse(_message.Message):
    __slots__ = ("assignments", "routes", "arrivals", "cost", "unassigned", "backend", "model_version", "timings_ms", "solved_by")
    class RoutesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: RouteStops
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[RouteStops, _Mapping]] = ...) -> None: ...
    class ArrivalsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Arrival
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Arrival, _Mapping]] = ...) -> None: ...
    class TimingsMsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    ARRIVALS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    UNASSIGNED_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_MS_FIELD_NUMBER: _ClassVar[int]
    SOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    assignments: _containers.RepeatedCompositeFieldContainer[Assignment]
    routes: _containers.MessageMap[str, RouteStops]
    arrivals: _containers.MessageMap[str, Arrival]
    cost: Cost
    unassigned: _containers.RepeatedCompositeFieldContainer[Unassigned]
    backend: str
    model_version: str
    timings_ms: _containers.ScalarMap[str, float]
    solved_by: str
    def __init__(self, assignments: _Optional[_Iterable[_Union[Assignment, _Mapping]]] = ..., routes: _Optional[_Mapping[str, RouteStops]] = ..., arrivals: _Optional[_Mapping[str, Arrival]] = ..., cost: _Optional[_Union[Cost, _Mapping]] = ..., unassigned: _Optional[_Iterable[_Union[Unassigned, _Mapping]]] = ..., backend: _Optional[str] = ..., model_version: _Optional[str] = ..., timings_ms: _Optional[_Mapping[str, float]] = ..., solved_by: _Optional[str] = ...) -> None: ...

class EtrRequest(_message.Message):
    __slots__ = ("orders", "utc_offset_s")
    ORDERS_FIELD_NUMBER: _ClassVar[int]
    UTC_OFFSET_S_FIELD_NUMBER: _ClassVar[int]
    orders: _containers.RepeatedCompositeFieldContainer[Order]
    utc_offset_s: float
    def __init__(self, orders: _Optional[_Iterable[_Union[Order, _Mapping]]] = ..., utc_offset_s: _Optional[float] = ...) -> None: ...

class EtrResponse(_message.Message):
    __slots__ = ("minutes", "model_version")
    MINUTES_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    minutes: _containers.RepeatedScalarFieldContainer[float]
    model_version: str
    def __init__(self, minutes: _Optional[_Iterable[float]] = ..., model_version: _Optional[str] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("id", "x", "y", "demand", "earliest", "latest", "service", "pickup_index", "delivery_index")
    ID_FIELD_NUMBER: _ClassVar[int]
    X_FIELD_NUMBER: _ClassVar[int]
    Y_FIELD_NUMBER: _ClassVar[int]
    DEMAND_FIELD_NUMBER: _ClassVar[int]
    EARLIEST_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    PICKUP_INDEX_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_INDEX_FIELD_NUMBER: _ClassVar[int]
    id: int
    x: float
    y: float
    demand: int
    earliest: float
    latest: float
    service: float
    pickup_index: int
    delivery_index: int
    def __init__(self, id: _Optional[int] = ..., x: _Optional[float] = ..., y: _Optional[float] = ..., demand: _Optional[int] = ..., earliest: _Optional[float] = ..., latest: _Optional[float] = ..., service: _Optional[float] = ..., pickup_index: _Optional[int] = ..., delivery_index: _Optional[int] = ...) -> None: ...

class SolveRequest(_message.Message):
    __slots__ = ("name", "vehicles", "capacity", "tasks", "time_limit_s", "seed")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VEHICLES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    name: str
    vehicles: int
    capacity: int
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    time_limit_s: float
    seed: int
    def __init__(self, name: _Optional[str] = ..., vehicles: _Optional[int] = ..., capacity: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ..., time_limit_s: _Optional[float] = ..., seed: _Optional[int] = ...) -> None: ...

class VehicleRoute(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, tasks: _Optional[_Iterable[int]] = ...) -> None: ...

class SolveResponse(_message.Message):
    __slots__ = ("instance", "vehicles", "distance", "feasible", "seconds", "routes", "cached", "unassigned")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    VEHICLES_FIELD_NUMBER: _ClassVar[int]
    DISTANCE_FIELD_NUMBER: _ClassVar[int]
    FEASIBLE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    UNASSIGNED_FIELD_NUMBER: _ClassVar[int]
    instance: str
    vehicles: int
    distance: float
    feasible: bool
    seconds: float
    routes: _containers.RepeatedCompositeFieldContainer[VehicleRoute]
    cached: bool
    unassigned: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, instance: _Optional[str] = ..., vehicles: _Optional[int] = ..., distance: _Optional[float] = ..., feasible: _Optional[bool] = ..., seconds: _Optional[float] = ..., routes: _Optional[_Iterable[_Union[VehicleRoute, _Mapping]]] = ..., cached: _Optional[bool] = ..., unassigned: _Optional[_Iterable[int]] = ...) -> None: ...
