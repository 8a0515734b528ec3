"""Domain types, defined once: riders, orders, routes, rounds and plans, and the traffic
classes every queue serves them by (no imports of ours)."""

from domain.geo import EARTH_RADIUS_M, LatLng, LocalProjection, haversine_m
from domain.order_columns import OrderColumns
from domain.rules import MAX_CLOCK_SPAN_S, MIN_BOX_UNITS, MIN_SPEED_MPS
from domain.traffic import TrafficClass
from domain.types import (
    Assignment,
    CostBreakdown,
    DispatchPlan,
    DispatchRound,
    DispatchWeights,
    Order,
    Rider,
    Route,
    RouteTable,
    Stop,
    StopKind,
    Unassigned,
    UnassignedReason,
)

__all__ = [
    "EARTH_RADIUS_M",
    "MAX_CLOCK_SPAN_S",
    "MIN_BOX_UNITS",
    "MIN_SPEED_MPS",
    "Assignment",
    "CostBreakdown",
    "DispatchPlan",
    "DispatchRound",
    "DispatchWeights",
    "LatLng",
    "LocalProjection",
    "Order",
    "OrderColumns",
    "Rider",
    "Route",
    "RouteTable",
    "Stop",
    "StopKind",
    "TrafficClass",
    "Unassigned",
    "UnassignedReason",
    "haversine_m",
]
