"""The arrays the kernels read: a batch of routes and a batch of orders.

Shapes follow ``domain.shapes``: ``R`` routes with ``L`` stop slots each, ``O`` orders; planar
metres, seconds since the round's ``now``, capacity units. Both containers are plain frozen
dataclasses of NumPy or CuPy arrays; ``check()`` enforces dtypes, shapes and one device, because
the CUDA kernels check nothing themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import cached_property
from types import ModuleType
from typing import Any

import numpy as np

from kernels.backend import array_module
from kernels.transfers import to_device, to_host

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)


def _want(name: str, a: Any, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    if a.dtype != dtype:
        raise ValueError(f"{name} must be {dtype}, got {a.dtype}")
    if tuple(a.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(a.shape)}")


class _ArrayBatch:
    """Shared helpers: move to another array module, select rows."""

    def arrays(self) -> list[Any]:
        """Every array of the batch, in field order."""
        return [getattr(self, f.name) for f in fields(self)]  # type: ignore[arg-type]

    def with_arrays(self, arrays: list[Any]) -> Any:
        """The same batch holding ``arrays`` (field order, as ``arrays()`` gives them)."""
        names = [f.name for f in fields(self)]  # type: ignore[arg-type]
        return replace(self, **dict(zip(names, arrays, strict=True)))  # type: ignore[type-var]

    def to(self, xp: ModuleType) -> Any:
        """The same batch with every array moved to ``xp`` (numpy or cupy): one copy of the
        whole batch (``kernels.transfers``), none where it is there already."""
        here = self.xp
        if here is xp:
            return self
        if xp is np:
            return self.with_arrays(to_host(self.arrays(), here))
        return self.with_arrays(to_device(self.arrays(), xp))

    def take(self, index: Any) -> Any:
        """Rows ``index`` (int[K]) of every array, as a new batch."""
        return replace(self, **{f.name: getattr(self, f.name)[index] for f in fields(self)})  # type: ignore[arg-type,type-var]

    @cached_property  # arrays are never swapped in place (frozen), so neither is the device
    def xp(self) -> ModuleType:
        return array_module(*(getattr(self, f.name) for f in fields(self)))  # type: ignore[arg-type]


def checked_pair(routes: RouteArrays, orders: OrderArrays) -> ModuleType:
    """Check both batches (``check``) and that they live on one device; returns its ``xp``.
    Raises ValueError naming what is wrong."""
    routes.check()
    orders.check()
    xp = routes.xp
    if orders.xp is not xp:
        raise ValueError("routes and orders live on different devices")
    return xp


#: The per-stop arrays of ``RouteArrays`` (``stop_xy`` first, then one value per stop): what
#: an edit of a route rewrites.
STOP_ARRAYS = ("stop_xy", "stop_ready", "stop_due", "stop_latest", "stop_service", "stop_load")


@dataclass(frozen=True)
class RouteArrays(_ArrayBatch):
    """R routes, padded to L stop slots.

    start_xy : float32[R, 2]  where each rider starts, metres.
    start_time : float32[R]  when it leaves the start, seconds.
    speed : float32[R]  metres per second.
    capacity : float32[R]  capacity units.
    load0 : float32[R]  load already on board at the start.
    n_stops : int32[R]  stops in use (<= L).
    insert_limit : int32[R]  new stops may go at positions 0..insert_limit (n_stops, or
        n_stops - 1 when the last stop is a fixed end such as a depot).
    stop_xy : float32[R, L, 2]
    stop_ready : float32[R, L]  earliest service start (food ready); -inf for none.
    stop_due : float32[R, L]  soft deadline: arrival after it is lateness; +inf for none.
    stop_latest : float32[R, L]  hard deadline on arrival; +inf for none.
    stop_service : float32[R, L]  seconds spent at the stop.
    stop_load : float32[R, L]  load change at the stop (+size pickup, -size drop-off).
    """

    start_xy: Any
    start_time: Any
    speed: Any
    capacity: Any
    load0: Any
    n_stops: Any
    insert_limit: Any
    stop_xy: Any
    stop_ready: Any
    stop_due: Any
    stop_latest: Any
    stop_service: Any
    stop_load: Any

    @property
    def shape(self) -> tuple[int, int]:
        """(R, L)."""
        return int(self.stop_ready.shape[0]), int(self.stop_ready.shape[1])

    def check(self) -> RouteArrays:
        """Raise ValueError on a wrong dtype, shape or mixed devices; return self."""
        r, l_ = self.stop_ready.shape if self.stop_ready.ndim == 2 else (-1, -1)
        if r < 0:
            raise ValueError(f"stop_ready must be 2-D [R, L], got shape {self.stop_ready.shape}")
        _want("start_xy", self.start_xy, _F32, (r, 2))
        for name in ("start_time", "speed", "capacity", "load0"):
            _want(name, getattr(self, name), _F32, (r,))
        _want("n_stops", self.n_stops, _I32, (r,))
        _want("insert_limit", self.insert_limit, _I32, (r,))
        _want("stop_xy", self.stop_xy, _F32, (r, l_, 2))
        for name in STOP_ARRAYS[1:]:
            _want(name, getattr(self, name), _F32, (r, l_))
        _ = self.xp  # mixed devices raise
        return self

    @classmethod
    def empty(cls, n_routes: int, n_slots: int, xp: ModuleType = np) -> RouteArrays:
        """R routes of no stops, padding values in place; fill the fields, then ``check()``."""
        f = xp.float32
        return cls(
            start_xy=xp.zeros((n_routes, 2), f),
            start_time=xp.zeros(n_routes, f),
            speed=xp.ones(n_routes, f),
            capacity=xp.full(n_routes, xp.inf, f),
            load0=xp.zeros(n_routes, f),
            n_stops=xp.zeros(n_routes, xp.int32),
            insert_limit=xp.zeros(n_routes, xp.int32),
            **empty_stops(n_routes, n_slots, xp),
        )


#: What an unused stop slot holds, per stop array (no place, no ready time, no deadlines, no
#: service, no load).
STOP_PADDING = {
    "stop_xy": 0.0,
    "stop_ready": -np.inf,
    "stop_due": np.inf,
    "stop_latest": np.inf,
    "stop_service": 0.0,
    "stop_load": 0.0,
}


def empty_stops(n_routes: int, n_slots: int, xp: ModuleType = np) -> dict[str, Any]:
    """Every stop array of R routes of L unused slots (``STOP_PADDING``), by name."""
    return {
        name: xp.full(
            (n_routes, n_slots, 2) if name == "stop_xy" else (n_routes, n_slots), fill, xp.float32
        )
        for name, fill in STOP_PADDING.items()
    }


@dataclass(frozen=True)
class OrderArrays(_ArrayBatch):
    """O orders to insert.

    pickup_xy, dropoff_xy : float32[O, 2]  metres.
    ready : float32[O]  food ready (earliest pickup service start); -inf for none.
    pickup_latest : float32[O]  hard deadline on arrival at the pickup; +inf for none.
    due : float32[O]  soft deadline at the drop-off (promised time); +inf for none.
    dropoff_ready : float32[O]  earliest service start at the drop-off (waiting allowed, as in
        the Li & Lim PDPTW); -inf for none (dispatch drop-offs).
    dropoff_latest : float32[O]  hard deadline on arrival at the drop-off; +inf for none.
    pickup_service, dropoff_service : float32[O]  seconds.
    size : float32[O]  capacity units.
    has_pickup : bool[O]  False for an order already on board (only its drop-off is placed, at
        positions 0..insert_limit; its load is already in ``load0``).
    """

    pickup_xy: Any
    dropoff_xy: Any
    ready: Any
    pickup_latest: Any
    due: Any
    dropoff_latest: Any
    dropoff_ready: Any
    pickup_service: Any
    dropoff_service: Any
    size: Any
    has_pickup: Any

    def __len__(self) -> int:
        return int(self.ready.shape[0])

    def check(self) -> OrderArrays:
        """Raise ValueError on a wrong dtype, shape or mixed devices; return self."""
        if self.ready.ndim != 1:
            raise ValueError(f"ready must be 1-D [O], got shape {self.ready.shape}")
        o = self.ready.shape[0]
        _want("pickup_xy", self.pickup_xy, _F32, (o, 2))
        _want("dropoff_xy", self.dropoff_xy, _F32, (o, 2))
        for name in (
            "ready",
            "pickup_latest",
            "due",
            "dropoff_latest",
            "dropoff_ready",
            "pickup_service",
            "dropoff_service",
            "size",
        ):
            _want(name, getattr(self, name), _F32, (o,))
        _want("has_pickup", self.has_pickup, np.dtype(np.bool_), (o,))
        _ = self.xp
        return self
