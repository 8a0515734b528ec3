"""An MDRP solution checker and scorer that shares no code with the replay simulator.

It reads the instance folder and the three solution files itself (``planner.mdrp.instance``
and ``planner.mdrp.replay`` are not imported: a bug there cannot hide here), recomputes every
move's travel time with MDRP's rule, ceil(euclidean metres / meters_per_minute) minutes, and
checks the library's rules:

* each order in at most one bundle, all of a bundle's orders from one restaurant;
* no assignment before its orders are placed; no pickup before a bundled order's food is
  ready or after the courier's off time;
* the courier is at the restaurant half a pickup service before the pickup, and reaches each
  customer half a drop-off service before its drop-off; drop-offs in the bundle's order, at
  least one drop-off service apart;
* every courier's moves are continuous in place (each starts where the previous ended, the
  first at its start ``0``) and in time (none leaves before the previous one arrived and its
  service there ended);
* the orders file agrees with the bundles.

Then the published metrics: delivered %, click-to-door (drop-off - placement) mean and p90,
overage (max(0, click-to-door - target)) mean, ready-to-pickup mean and p90, courier
utilisation (driving and service time / duty time), cost per order (sum over couriers of
max(pay per order x orders, hourly guarantee x duty hours) / orders delivered) and orders per
bundle.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path


class SolutionFormatError(ValueError):
    """A solution or instance file that cannot be read; the message names file and line."""


def _table(path: Path) -> list[tuple[int, list[str]]]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SolutionFormatError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    return [(k, ln.split()) for k, ln in enumerate(lines[1:], start=2) if ln.strip()]


def _int(path: Path, line: int, text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise SolutionFormatError(f"{path}:{line}: not a number: {text!r}") from None
    if value != int(value):
        raise SolutionFormatError(f"{path}:{line}: not a whole minute: {text!r}")
    return int(value)


@dataclass
class Metrics:
    orders: int
    delivered_pct: float
    click_to_door_mean: float
    click_to_door_p90: float
    overage_mean: float
    ready_to_pickup_mean: float
    ready_to_pickup_p90: float
    utilisation: float
    cost_per_order: float
    orders_per_bundle: float


@dataclass
class MdrpEvaluation:
    feasible: bool
    metrics: Metrics
    violations: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"feasible": self.feasible, "violations": self.violations, **asdict(self.metrics)}


def _p90(values: list[float]) -> float:
    # The 90th percentile by linear interpolation between order statistics (numpy's default).
    if not values:
        return math.nan
    s = sorted(values)
    pos = 0.9 * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


@dataclass(frozen=True)
class _Day:
    """The instance as the checker reads it: minutes, metres, dollars; ids as in the files."""

    meters_per_minute: float
    pickup_service: float
    dropoff_service: float
    target: float
    pay_per_order: float
    pay_per_hour: float
    place: dict[str, tuple[float, float]]  # restaurant or order (its customer) -> (x, y)
    restaurant_of: dict[str, str]
    ready_of: dict[str, int]
    placed_of: dict[str, int]
    shift: dict[str, tuple[int, int]]  # courier -> (on, off)
    start: dict[str, tuple[float, float]]

    def travel(self, a: tuple[float, float], b: tuple[float, float]) -> int:
        return math.ceil(math.hypot(a[0] - b[0], a[1] - b[1]) / self.meters_per_minute)


#: A bundle as the assignments file gives it: (assigned at, pickup, courier, order ids).
_Bundle = tuple[int, int, str, list[str]]


def _read_day(inst: Path) -> _Day:
    params_rows = _table(inst / "instance_parameters.txt")
    if len(params_rows) != 1 or len(params_rows[0][1]) != 7:
        raise SolutionFormatError(f"{inst / 'instance_parameters.txt'}: expected 7 values")
    mpm, ps, ds, target, _max_c2d, per_order, per_hour = map(float, params_rows[0][1])
    place = {r[0]: (float(r[1]), float(r[2])) for _, r in _table(inst / "restaurants.txt")}
    restaurant_of, ready_of, placed_of = {}, {}, {}
    for _, r in _table(inst / "orders.txt"):
        place[r[0]] = (float(r[1]), float(r[2]))
        placed_of[r[0]], restaurant_of[r[0]], ready_of[r[0]] = int(r[3]), r[4], int(r[5])
    shift, start = {}, {}
    for _, r in _table(inst / "couriers.txt"):
        start[r[0]] = (float(r[1]), float(r[2]))
        shift[r[0]] = (int(r[3]), int(r[4]))
    return _Day(
        meters_per_minute=mpm,
        pickup_service=ps,
        dropoff_service=ds,
        target=target,
        pay_per_order=per_order,
        pay_per_hour=per_hour,
        place=place,
        restaurant_of=restaurant_of,
        ready_of=ready_of,
        placed_of=placed_of,
        shift=shift,
        start=start,
    )


def _check_bundles(
    day: _Day, path: Path, problems: list[str]
) -> tuple[list[_Bundle], dict[str, int]]:
    """The bundles (unknown orders dropped) and each order's bundle index."""
    bundles: list[_Bundle] = []
    bundle_of: dict[str, int] = {}
    for line, f in _table(path):
        if len(f) < 4:
            raise SolutionFormatError(f"{path}:{line}: expected time, pickup, courier, orders")
        at, pickup, courier, ids = _int(path, line, f[0]), _int(path, line, f[1]), f[2], f[3:]
        where = f"{path.name}:{line}"
        if courier not in day.shift:
            problems.append(f"{where}: unknown courier {courier}")
            continue
        for oid in ids:
            if oid not in day.placed_of:
                problems.append(f"{where}: unknown order {oid}")
            elif oid in bundle_of:
                problems.append(f"{where}: order {oid} is in more than one bundle")
            else:
                bundle_of[oid] = len(bundles)
        ids = [o for o in ids if o in day.placed_of]
        if len({day.restaurant_of[o] for o in ids}) > 1:
            problems.append(f"{where}: a bundle from more than one restaurant")
        for oid in ids:
            if at < day.placed_of[oid]:
                problems.append(f"{where}: assigned at {at}, before order {oid} was placed")
            if pickup < day.ready_of[oid]:
                problems.append(f"{where}: picked up at {pickup}, before order {oid} is ready")
        if pickup > day.shift[courier][1]:
            problems.append(f"{where}: pickup at {pickup}, after courier {courier}'s off time")
        if pickup < at:
            problems.append(f"{where}: picked up at {pickup}, before the assignment at {at}")
        bundles.append((at, pickup, courier, ids))
    return bundles, bundle_of


def _check_orders(
    path: Path, bundles: list[_Bundle], bundle_of: dict[str, int], problems: list[str]
) -> dict[str, int]:
    """Each delivered order's drop-off minute, the orders file held to the bundles."""
    drop_of: dict[str, int] = {}
    listed: dict[str, tuple[str, str, str]] = {}
    for line, f in _table(path):
        if len(f) != 6:
            raise SolutionFormatError(f"{path}:{line}: expected 6 fields, got {len(f)}")
        listed[f[0]] = (f[3], f[4], f[5])
    for oid, k in bundle_of.items():
        _, pickup, courier, _ = bundles[k]
        row = listed.get(oid)
        if row is None or "nan" in row:
            problems.append(f"orders: {oid} is in a bundle but not listed as delivered")
            continue
        if int(float(row[0])) != pickup or row[2] != courier:
            problems.append(f"orders: {oid} pickup/courier disagree with its bundle")
        drop_of[oid] = int(float(row[1]))
    for oid, row in listed.items():
        if "nan" not in row and oid not in bundle_of:
            problems.append(f"orders: {oid} listed as delivered but in no bundle")
    return drop_of


def _check_moves(
    day: _Day, path: Path, bundles: list[_Bundle], drop_of: dict[str, int], problems: list[str]
) -> float:
    """Moves continuous in place and time, the courier where each bundle says when it says;
    returns the couriers' busy minutes (driving and service)."""
    ps, ds = day.pickup_service, day.dropoff_service
    moves: dict[str, list[tuple[int, int, str, str]]] = {}
    for line, f in _table(path):
        if len(f) != 4:
            raise SolutionFormatError(f"{path}:{line}: expected 4 fields, got {len(f)}")
        moves.setdefault(f[0], []).append((line, _int(path, line, f[1]), f[2], f[3]))
    busy_minutes = 0.0
    arrivals: dict[tuple[str, str], list[int]] = {}  # (courier, place) -> arrival minutes
    departures: dict[tuple[str, str], list[int]] = {}  # (courier, place) -> departure minutes
    for courier, seq in moves.items():
        if courier not in day.shift:
            problems.append(f"couriers: unknown courier {courier}")
            continue
        here, free = "0", day.shift[courier][0]
        for line, depart, origin, dest in seq:
            where = f"{path.name}:{line}"
            if origin != here:
                problems.append(f"{where}: {courier} leaves {origin} but is at {here}")
            if depart < free:
                problems.append(f"{where}: {courier} leaves at {depart}, busy until {free}")
            departures.setdefault((courier, origin), []).append(depart)
            a = day.start[courier] if origin == "0" else day.place.get(origin)
            b = day.start[courier] if dest == "0" else day.place.get(dest)
            here = dest
            if a is None or b is None:
                problems.append(f"{where}: unknown place {origin if a is None else dest}")
                continue
            minutes = day.travel(a, b)
            busy_minutes += minutes
            arrive = depart + minutes
            arrivals.setdefault((courier, dest), []).append(arrive)
            # At a customer the courier is busy through the drop-off's second half; at a
            # restaurant the bundle check below holds its departure to the pickup.
            free = drop_of[dest] + ds / 2 if dest in drop_of else arrive
    for _, pickup, courier, ids in bundles:
        if not ids:
            continue
        rest = day.restaurant_of[ids[0]]
        there = [a for a in arrivals.get((courier, rest), []) if a <= pickup - ps / 2]
        if not there:
            problems.append(f"bundle {ids}: {courier} is not at {rest} by {pickup - ps / 2}")
        else:
            left = [d for d in departures.get((courier, rest), []) if d >= max(there)]
            if left and min(left) < pickup + ps / 2:
                problems.append(f"bundle {ids}: {courier} leaves {rest} before the pickup ends")
        last = None
        for oid in ids:
            drop = drop_of.get(oid)
            if drop is None:
                continue
            if not [a for a in arrivals.get((courier, oid), []) if a <= drop - ds / 2]:
                problems.append(f"order {oid}: {courier} does not reach the customer by {drop}")
            if last is not None and drop - last < ds:
                problems.append(f"order {oid}: dropped {drop - last} min after the previous one")
            if drop < pickup:
                problems.append(f"order {oid}: dropped off before its pickup")
            last = drop
        busy_minutes += ps + ds * len(ids)
    return busy_minutes


def _metrics(
    day: _Day,
    bundles: list[_Bundle],
    bundle_of: dict[str, int],
    drop_of: dict[str, int],
    busy_minutes: float,
) -> Metrics:
    delivered = [o for o in day.placed_of if o in drop_of]
    c2d = [drop_of[o] - day.placed_of[o] for o in delivered]
    r2p = [bundles[bundle_of[o]][1] - day.ready_of[o] for o in delivered]
    orders_by_courier: dict[str, int] = {}
    for o in delivered:
        c = bundles[bundle_of[o]][2]
        orders_by_courier[c] = orders_by_courier.get(c, 0) + 1
    duty = {c: (off - on) for c, (on, off) in day.shift.items()}
    pay = sum(
        max(day.pay_per_order * orders_by_courier.get(c, 0), day.pay_per_hour * d / 60)
        for c, d in duty.items()
    )
    n_bundles = sum(1 for b in bundles if b[3])
    return Metrics(
        orders=len(day.placed_of),
        delivered_pct=100.0 * len(delivered) / max(1, len(day.placed_of)),
        click_to_door_mean=_mean(c2d),
        click_to_door_p90=_p90(c2d),
        overage_mean=_mean([max(0.0, v - day.target) for v in c2d]),
        ready_to_pickup_mean=_mean(r2p),
        ready_to_pickup_p90=_p90(r2p),
        utilisation=busy_minutes / max(1, sum(duty.values())),
        cost_per_order=pay / len(delivered) if delivered else math.nan,
        orders_per_bundle=len(delivered) / n_bundles if n_bundles else math.nan,
    )


def evaluate(instance_dir: Path, solution_dir: Path) -> MdrpEvaluation:
    """Check the solution in ``solution_dir`` against ``instance_dir``; lists every violation
    (``feasible`` is True when there are none) and computes the metrics. Raises
    SolutionFormatError naming the file and line of a file that cannot be read."""
    day = _read_day(Path(instance_dir))
    sol = Path(solution_dir)
    problems: list[str] = []
    bundles, bundle_of = _check_bundles(day, sol / "solution_info_assignments.txt", problems)
    drop_of = _check_orders(sol / "solution_info_orders.txt", bundles, bundle_of, problems)
    busy = _check_moves(day, sol / "solution_info_couriers.txt", bundles, drop_of, problems)
    metrics = _metrics(day, bundles, bundle_of, drop_of, busy)
    return MdrpEvaluation(not problems, metrics, problems)
