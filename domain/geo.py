"""Positions and distances.

Positions are WGS-84 latitude/longitude in degrees. Kernels work in a local plane: every round is
projected once, equirectangularly, about its own centroid, into metres (x east, y north), and
travel distance is the Euclidean distance in that plane.

Error of the projection against the haversine great-circle distance, for points within 20 km of
the centroid (a city): at most 0.2% at latitudes up to 32 degrees (Shanghai, 0.16%), at most 0.5%
up to 60 degrees; it grows about linearly with the north-south offset times tan(latitude)
(measured in ``tests/test_domain.py``). That is far below the error of taking straight lines for
roads in the first place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from domain.rules import POSITION

_LAT, _LNG = POSITION["lat"], POSITION["lng"]
EARTH_RADIUS_M = 6_371_008.8
"""Mean Earth radius (IUGG), metres."""


@dataclass(frozen=True, slots=True)
class LatLng:
    """A WGS-84 position in degrees."""

    lat: float
    lng: float

    def __post_init__(self) -> None:
        if _LAT.holds(self.lat) and _LNG.holds(self.lng):
            return  # one test for a valid position (a round builds thousands)
        _LAT.check("lat", self.lat)
        _LNG.check("lng", self.lng)


def haversine_m(a: LatLng, b: LatLng) -> float:
    """Great-circle distance in metres between two positions (spherical Earth)."""
    return haversine_deg_m(a.lat, a.lng, b.lat, b.lng)


def haversine_deg_m(lat_a: float, lng_a: float, lat_b: float, lng_b: float) -> float:
    """``haversine_m`` between two positions given in degrees (no ``LatLng`` built)."""
    phi1, phi2 = math.radians(lat_a), math.radians(lat_b)
    dphi = phi2 - phi1
    dlmb = math.radians(lng_b - lng_a)
    h = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(h)))


@dataclass(frozen=True, slots=True)
class LocalProjection:
    """Equirectangular projection about ``origin`` into metres (x east, y north).

    Longitudes are taken the short way round from the origin, so a round that straddles the
    180th meridian is as compact as any other. The east-west scale is the origin's
    (``cos(lat)``): for a round a few tens of km across the error is well under 1% below
    about 80 degrees of latitude, and grows towards the poles, where no delivery market is.
    """

    origin: LatLng

    def to_xy(self, lat_deg: np.ndarray, lng_deg: np.ndarray) -> np.ndarray:
        """Project degrees to metres.

        lat_deg, lng_deg : float64[...]
        Returns float64[..., 2], metres from the origin.
        """
        k = math.pi / 180.0 * EARTH_RADIUS_M
        east = (np.asarray(lng_deg, dtype=np.float64) - self.origin.lng + 180.0) % 360.0 - 180.0
        x = east * k * math.cos(math.radians(self.origin.lat))
        y = (np.asarray(lat_deg, dtype=np.float64) - self.origin.lat) * k
        return np.stack([x, y], axis=-1)

    @classmethod
    def around(cls, lat: Sequence[float], lng: Sequence[float]) -> LocalProjection:
        """The projection about the centroid of the points (``lat[k]``, ``lng[k]``), degrees
        (the origin if there are none); longitudes averaged on the circle, so points either
        side of the 180th meridian centre near it, not on the far side of the Earth."""
        if not lat:
            return cls(LatLng(0.0, 0.0))
        # ``map`` in C, summed left to right as a loop would: the same bits, a third the time.
        east = sum(map(math.cos, map(math.radians, lng)))
        north = sum(map(math.sin, map(math.radians, lng)))
        mean_lng = math.degrees(math.atan2(north, east)) if (east or north) else 0.0
        return cls(LatLng(sum(lat) / len(lat), mean_lng))
