"""Domain types, defined once: riders, orders, routes, rounds and plans (no imports of ours)."""

from domain.geo import EARTH_RADIUS_M, LatLng, LocalProjection, haversine_m
from domain.types import (
    MIN_SPEED_MPS,
    Assignment,
    CostBreakdown,
    DispatchPlan,
    DispatchRound,
    DispatchWeights,
    Order,
    Rider,
    Route,
    Stop,
    StopKind,
    Unassigned,
    UnassignedReason,
)

__all__ = [
    "EARTH_RADIUS_M",
    "MIN_SPEED_MPS",
    "Assignment",
    "CostBreakdown",
    "DispatchPlan",
    "DispatchRound",
    "DispatchWeights",
    "LatLng",
    "LocalProjection",
    "Order",
    "Rider",
    "Route",
    "Stop",
    "StopKind",
    "Unassigned",
    "UnassignedReason",
    "haversine_m",
]
