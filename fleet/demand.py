"""A fleet day's requests: cities whose orders follow real MDRP days, and what they send.

Each city replays the order placement times of one Grubhub day (lunch and dinner peaks),
scaled by its size and shifted by its time zone. From the orders come three streams:

- ``query``  online ETR: a customer's page of ``rows_per_query`` delivery-time estimates,
  ``queries_per_order`` of them in the minutes before each order is placed;
- ``round``  online dispatch: one round per city every ``round_period_s`` while it has open
  orders (placed in the last ``open_order_min``); its work is its size, orders x the
  couriers on shift (``riders_per_order`` each), the rider x order pairs a round prices; and
  rounds of ``large_round_orders`` or more go to ``dispatch_large``; a city with more open
  orders than ``max_round_orders`` runs one round per dispatch zone, the zones' rounds of a
  period together, spread over it or each at a phase of its own (``zone_rounds``);
- ``bulk``   offline ETR: re-scoring jobs of ``offline_rows_per_request`` rows, arriving at a
  steady rate all day, ``offline_rows_per_order`` rows per order of the day.

Only placement times are read from the days (never their future beyond the arrival curve).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from domain import TrafficClass
from fleet.scenario import Scenario, Traffic
from planner.mdrp.instance import load_instance


@dataclass(frozen=True)
class City:
    """placed_s : float64[n] sorted order placement times on the fleet's clock, seconds."""

    id: int
    day: str
    size: float
    shift_h: float
    placed_s: np.ndarray


@dataclass(frozen=True)
class Arrivals:
    """The day's requests in arrival order, as parallel arrays of length n.

    t_s float64 (seconds), deployment int16 (index into ``deployments``), online bool,
    rows int32 (queue units: ETR rows, 1 per round), work float64 (cost units: rows, or rider x
    order pairs), kind int8 (index into ``KINDS``), city int16.
    """

    deployments: tuple[str, ...]
    t_s: np.ndarray
    deployment: np.ndarray
    online: np.ndarray
    rows: np.ndarray
    work: np.ndarray
    kind: np.ndarray
    city: np.ndarray

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def end_s(self) -> float:
        return float(self.t_s[-1]) if len(self.t_s) else 0.0

    def traffic_class(self, i: int) -> TrafficClass:
        return TrafficClass.ONLINE if self.online[i] else TrafficClass.OFFLINE

    def of(self, deployment: int) -> Arrivals:
        """The requests to one deployment (index into ``deployments``), in arrival order."""
        keep = self.deployment == deployment
        columns = (self.t_s, self.deployment, self.online, self.rows, self.work, self.kind)
        return Arrivals(self.deployments, *(c[keep] for c in (*columns, self.city)))


KINDS = ("query", "round", "bulk")


def placement_minutes(folder: Path) -> np.ndarray:
    """A day's order placement times (minutes from the start of its day), sorted."""
    return np.array([o.placed for o in load_instance(folder).orders], dtype=np.float64)


def available_days(scenario: Scenario, mdrp_dir: Path) -> list[str]:
    """The scenario's days found under ``mdrp_dir``, else every day folder there."""
    days = [d for d in scenario.mdrp_days if (mdrp_dir / d / "orders.txt").is_file()]
    days = days or sorted(p.name for p in mdrp_dir.iterdir() if (p / "orders.txt").is_file())
    if not days:
        raise FileNotFoundError(f"no MDRP day (a folder with orders.txt) under {mdrp_dir}")
    return days


def make_cities(scenario: Scenario, mdrp_dir: Path, rng: np.random.Generator) -> list[City]:
    """The scenario's cities on its day. With ``day_offset`` > 0, the same cities (sizes and
    time zones as on day 0) on another day: each city replays another real day, its copies
    jittered anew."""
    days = available_days(scenario, mdrp_dir)
    curves = {d: placement_minutes(mdrp_dir / d) * 60.0 for d in days}
    size = scenario.city_size
    cities = []
    for c in range(scenario.cities):
        mult = size.scale * float(
            np.clip(rng.lognormal(-(size.sigma**2) / 2, size.sigma), size.min, size.max)
        )
        shift_h = float(scenario.time_zones_h[rng.integers(len(scenario.time_zones_h))])
        day = days[c % len(days)]
        cities.append(City(c, day, mult, shift_h, _replay(curves[day], mult, shift_h, rng)))
    if scenario.day_offset == 0:
        return cities
    day_rng = np.random.default_rng([scenario.seed, scenario.day_offset])
    out = []
    for city in cities:
        day = days[(city.id + scenario.day_offset) % len(days)]
        placed = _replay(curves[day], city.size, city.shift_h, day_rng)
        out.append(City(city.id, day, city.size, city.shift_h, placed))
    return out


def _replay(base: np.ndarray, mult: float, shift_h: float, rng: np.random.Generator) -> np.ndarray:
    """float64[n] sorted placement times (s): floor(mult) copies of every order of ``base`` and
    one more with the fractional probability, each moved up to five minutes so one day's copies
    do not arrive in lockstep, shifted by the time zone."""
    copies = np.floor(mult).astype(int) + (rng.random(len(base)) < mult % 1)
    placed = np.repeat(base, copies) + rng.uniform(-300, 300, int(copies.sum()))
    return np.sort(np.maximum(0.0, placed + shift_h * 3600))


def make_arrivals(scenario: Scenario, cities: list[City], rng: np.random.Generator) -> Arrivals:
    deployments = tuple(scenario.deployments)
    index = {name: k for k, name in enumerate(deployments)}
    etr = next(n for n, d in scenario.deployments.items() if d.model == "etr")
    small = "dispatch_small" if "dispatch_small" in index else None
    large = "dispatch_large" if "dispatch_large" in index else small
    tr = scenario.traffic
    parts: list[tuple] = []
    end = max((float(c.placed_s[-1]) for c in cities if len(c.placed_s)), default=0.0)
    for city in cities:
        placed = city.placed_s
        if not len(placed):
            continue
        n_q = rng.poisson(tr.queries_per_order, len(placed))
        before = np.repeat(placed, n_q)
        # An order placed in the day's first minutes had its views since the day began (not
        # all at its first second: clamping them to 0 made a burst no day has).
        lead = np.minimum(tr.query_lead_min * 60, before)
        qt = before - rng.uniform(0, 1, int(n_q.sum())) * lead
        parts.append(_part(qt, index[etr], True, tr.rows_per_query, tr.rows_per_query, 0, city))
        if small is not None:
            start = placed[0] + rng.uniform(0, tr.round_period_s)
            ticks = np.arange(start, placed[-1] + tr.open_order_min * 60, tr.round_period_s)
            n_open = np.searchsorted(placed, ticks, "right") - np.searchsorted(
                placed, ticks - tr.open_order_min * 60, "right"
            )
            keep = n_open > 0
            ticks, n_open = ticks[keep], n_open[keep]
            # A city larger than a dispatch zone runs one round per zone, zones of equal size.
            zones = np.ceil(n_open / tr.max_round_orders).astype(int)
            ticks = np.repeat(ticks, zones) + _zone_offsets(zones, tr, rng)
            n_open = np.repeat(np.ceil(n_open / zones), zones)
            couriers = np.ceil(n_open * tr.riders_per_order)
            dep = np.where(n_open >= tr.large_round_orders, index[large], index[small])
            parts.append(_part(ticks, dep, True, 1, n_open * couriers, 1, city))
    total_rows = sum(len(c.placed_s) for c in cities) * tr.offline_rows_per_order
    n_bulk = math.ceil(total_rows / tr.offline_rows_per_request) if total_rows else 0
    if n_bulk:
        bt = np.sort(rng.uniform(0, end, n_bulk))
        rows = tr.offline_rows_per_request
        parts.append(
            (
                bt,
                np.full(n_bulk, index[etr]),
                np.zeros(n_bulk, bool),
                np.full(n_bulk, rows),
                np.full(n_bulk, float(rows)),
                np.full(n_bulk, 2),
                np.full(n_bulk, -1),
            )
        )
    cols = [np.concatenate([p[k] for p in parts]) for k in range(7)]
    order = np.argsort(cols[0], kind="stable")
    return Arrivals(
        deployments,
        cols[0][order].astype(np.float64),
        cols[1][order].astype(np.int16),
        cols[2][order].astype(bool),
        cols[3][order].astype(np.int32),
        cols[4][order].astype(np.float64),
        cols[5][order].astype(np.int8),
        cols[6][order].astype(np.int16),
    )


def _part(t, deployment, online, rows, work, kind, city: City) -> tuple:
    n = len(t)
    return (
        np.asarray(t, np.float64),
        np.broadcast_to(deployment, n).astype(np.int16),
        np.full(n, online),
        np.broadcast_to(rows, n).astype(np.int32),
        np.broadcast_to(np.asarray(work, np.float64), n).astype(np.float64),
        np.full(n, kind),
        np.full(n, city.id),
    )


def _zone_offsets(zones: np.ndarray, tr: Traffic, rng: np.random.Generator) -> np.ndarray:
    """float64[zones.sum()]: when each zone's round starts after its city's tick (s), for
    ticks of ``zones`` int[n] zones each. burst: 0.1 s apart; spread: evenly over the period;
    random: zone k at a phase of its own for the whole day (uniform in the period, zone 0 at
    the tick), as zones dispatched by clocks of their own would be."""
    k = _index_within(zones)
    if tr.zone_rounds == "spread":
        return k * np.repeat(tr.round_period_s / zones, zones)
    if tr.zone_rounds == "random":
        phases = rng.uniform(0.0, tr.round_period_s, int(zones.max(initial=1)))
        phases[0] = 0.0
        return phases[k]
    return 0.1 * k


def _index_within(counts: np.ndarray) -> np.ndarray:
    """[2, 3] -> [0, 1, 0, 1, 2]: each element's index within its group."""
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    return np.arange(int(counts.sum())) - starts
