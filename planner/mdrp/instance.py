"""Grubhub MDRP instances (Reyes et al. 2018): one real day of meal delivery in a US market.

An instance folder holds tab-separated files with one header line each, ids as strings:
``orders.txt`` (order x y placement_time restaurant ready_time; x, y = the customer),
``restaurants.txt`` (restaurant x y), ``couriers.txt`` (courier x y on_time off_time; x, y =
where the courier is at on_time) and ``instance_parameters.txt`` (meters_per_minute, pickup and
drop-off service minutes, target and maximum click-to-door minutes, pay per order, guaranteed
pay per hour). Positions are metres, times integer minutes from the start of the day.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path


class MdrpInstanceError(ValueError):
    """A malformed instance folder; the message names the file and the line."""


@dataclass(frozen=True, slots=True)
class Restaurant:
    id: str
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class MdrpOrder:
    """placed, ready : minutes; x, y : the customer, metres."""

    id: str
    x: float
    y: float
    placed: int
    restaurant: str
    ready: int


@dataclass(frozen=True, slots=True)
class Courier:
    """x, y : where the courier is at ``on_time`` (metres); on, off : its shift, minutes."""

    id: str
    x: float
    y: float
    on: int
    off: int


@dataclass(frozen=True, slots=True)
class Parameters:
    meters_per_minute: float
    pickup_service: int
    dropoff_service: int
    target_click_to_door: int
    max_click_to_door: int
    pay_per_order: float
    pay_per_hour: float


@dataclass(frozen=True)
class MdrpInstance:
    name: str
    orders: tuple[MdrpOrder, ...]
    restaurants: dict[str, Restaurant]
    couriers: tuple[Courier, ...]
    params: Parameters

    def travel_minutes(self, a: tuple[float, float], b: tuple[float, float]) -> int:
        """MDRP's travel time: ceil(euclidean metres / meters_per_minute) minutes."""
        return math.ceil(math.hypot(a[0] - b[0], a[1] - b[1]) / self.params.meters_per_minute)


def _rows(path: Path, columns: int) -> list[tuple[int, list[str]]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise MdrpInstanceError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    lines = text.splitlines()
    if not lines:
        raise MdrpInstanceError(f"{path}:1: empty file (a header line is expected)")
    rows = []
    for k, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) != columns:
            raise MdrpInstanceError(f"{path}:{k}: expected {columns} fields, got {len(fields)}")
        rows.append((k, [f.strip() for f in fields]))
    return rows


def _number(path: Path, line: int, name: str, text: str, integer: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise MdrpInstanceError(f"{path}:{line}: {name} is not a number: {text!r}") from None
    if not math.isfinite(value) or (integer and value != int(value)):
        raise MdrpInstanceError(
            f"{path}:{line}: {name} must be a finite {'integer' if integer else 'number'}: {text!r}"
        )
    return int(value) if integer else value


def load_instance(folder: Path) -> MdrpInstance:
    """Read an instance folder; raises MdrpInstanceError naming ``file:line`` on any problem."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MdrpInstanceError(f"{folder}: not an instance folder")
    path = folder / "instance_parameters.txt"
    rows = _rows(path, 7)
    if len(rows) != 1:
        raise MdrpInstanceError(f"{path}: expected one line of values, got {len(rows)}")
    line, f = rows[0]
    params = Parameters(
        meters_per_minute=_number(path, line, "meters_per_minute", f[0]),
        pickup_service=int(_number(path, line, "pickup service minutes", f[1], True)),
        dropoff_service=int(_number(path, line, "dropoff service minutes", f[2], True)),
        target_click_to_door=int(_number(path, line, "target click-to-door", f[3], True)),
        max_click_to_door=int(_number(path, line, "maximum click-to-door", f[4], True)),
        pay_per_order=_number(path, line, "pay per order", f[5]),
        pay_per_hour=_number(path, line, "guaranteed pay per hour", f[6]),
    )
    if params.meters_per_minute <= 0:
        raise MdrpInstanceError(f"{path}:{line}: meters_per_minute must be > 0")

    path = folder / "restaurants.txt"
    restaurants: dict[str, Restaurant] = {}
    for line, f in _rows(path, 3):
        if f[0] in restaurants:
            raise MdrpInstanceError(f"{path}:{line}: duplicate restaurant id {f[0]!r}")
        restaurants[f[0]] = Restaurant(
            f[0], _number(path, line, "x", f[1]), _number(path, line, "y", f[2])
        )

    path = folder / "orders.txt"
    orders, seen = [], set()
    for line, f in _rows(path, 6):
        if f[0] in seen:
            raise MdrpInstanceError(f"{path}:{line}: duplicate order id {f[0]!r}")
        if f[4] not in restaurants:
            raise MdrpInstanceError(f"{path}:{line}: unknown restaurant {f[4]!r}")
        placed = int(_number(path, line, "placement_time", f[3], True))
        ready = int(_number(path, line, "ready_time", f[5], True))
        if ready < placed:
            raise MdrpInstanceError(
                f"{path}:{line}: ready_time {ready} is before placement_time {placed}"
            )
        seen.add(f[0])
        orders.append(
            MdrpOrder(
                f[0],
                _number(path, line, "x", f[1]),
                _number(path, line, "y", f[2]),
                placed,
                f[4],
                ready,
            )
        )

    path = folder / "couriers.txt"
    couriers, seen = [], set()
    for line, f in _rows(path, 5):
        if f[0] in seen:
            raise MdrpInstanceError(f"{path}:{line}: duplicate courier id {f[0]!r}")
        on = int(_number(path, line, "on_time", f[3], True))
        off = int(_number(path, line, "off_time", f[4], True))
        if off <= on:
            raise MdrpInstanceError(f"{path}:{line}: off_time {off} is not after on_time {on}")
        seen.add(f[0])
        couriers.append(
            Courier(f[0], _number(path, line, "x", f[1]), _number(path, line, "y", f[2]), on, off)
        )
    if not couriers:
        raise MdrpInstanceError(f"{folder / 'couriers.txt'}: no couriers")
    return MdrpInstance(
        name=folder.name,
        orders=tuple(sorted(orders, key=lambda o: (o.placed, o.id))),
        restaurants=restaurants,
        couriers=tuple(couriers),
        params=params,
    )
