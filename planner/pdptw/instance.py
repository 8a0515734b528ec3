"""Li & Lim PDPTW instances: loading and checking the file format.

Line 1: ``K Q S`` (vehicles, capacity, speed; speed is ignored: travel time equals distance).
Then one task per line: ``id x y demand earliest latest service pickup_index delivery_index``.
Task 0 is the depot; a pickup has demand > 0 and names its delivery; a delivery has demand < 0
and names its pickup. Siblings are not adjacent: the index fields are the truth.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class PdptwInstanceError(ValueError):
    """A malformed instance; the message names the file and the line (or the request field).

    row : the task row at fault when ``build_instance`` raised it, else None;
    reason : the message without its location.
    """

    def __init__(self, where: str, reason: str, row: int | None = None) -> None:
        super().__init__(f"{where}: {reason}")
        self.reason = reason
        self.row = row


@dataclass(frozen=True)
class PdptwInstance:
    """A PDPTW instance. Arrays are indexed by task id (0 = depot), N = number of tasks + 1.

    xy : float64[N, 2]; demand : int64[N]; earliest, latest, service : float64[N];
    pairs : int64[P, 2] (pickup id, delivery id) in file order.
    """

    name: str
    vehicles: int
    capacity: int
    xy: np.ndarray
    demand: np.ndarray
    earliest: np.ndarray
    latest: np.ndarray
    service: np.ndarray
    pairs: np.ndarray

    @property
    def n_tasks(self) -> int:
        return len(self.demand) - 1

    def distance(self, a: int, b: int) -> float:
        return float(np.hypot(*(self.xy[a] - self.xy[b])))


def load_instance(path: Path) -> PdptwInstance:
    """Parse a Li & Lim file; raises PdptwInstanceError naming ``path:line`` on any problem."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise PdptwInstanceError(str(path), f"cannot read ({exc.strerror or exc})") from exc
    lines = [(k, ln.split()) for k, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not lines:
        raise PdptwInstanceError(f"{path}:1", "empty file")
    (hline, head), body = lines[0], lines[1:]
    try:
        vehicles, capacity = int(head[0]), int(head[1])
    except (IndexError, ValueError) as exc:
        raise PdptwInstanceError(f"{path}:{hline}", "expected 'vehicles capacity speed'") from exc
    rows = []
    for line, fields in body:
        if len(fields) != 9:
            raise PdptwInstanceError(f"{path}:{line}", f"expected 9 fields, got {len(fields)}")
        try:
            rows.append(tuple(float(f) for f in fields))
        except ValueError as exc:
            raise PdptwInstanceError(f"{path}:{line}", f"not a number ({exc})") from exc
    if not rows:
        raise PdptwInstanceError(f"{path}:{hline}", "no tasks")
    line_of = [line for line, _ in body]
    return build_instance(path.stem, vehicles, capacity, rows, lambda k: f"{path}:{line_of[k]}")


def build_instance(
    name: str,
    vehicles: int,
    capacity: int,
    rows: list[tuple[float, ...]],
    where: Callable[[int], str],
) -> PdptwInstance:
    """An instance from rows ``(id, x, y, demand, earliest, latest, service, pickup_index,
    delivery_index)``, task 0 the depot. ``where(k)`` names row k in errors (a file line, or a
    request field). Raises PdptwInstanceError for ids out of order, inverted windows, zero demand or
    a pickup and delivery that do not name each other.
    """
    if vehicles < 1 or capacity < 1:
        raise PdptwInstanceError(where(0), "vehicles and capacity must be >= 1", 0)
    parsed = []
    for k, (tid, x, y, dem, e, l_, svc, p_idx, d_idx) in enumerate(rows):
        if int(tid) != k:
            raise PdptwInstanceError(where(k), f"task id {int(tid)} out of order (expected {k})", k)
        if l_ < e:
            raise PdptwInstanceError(where(k), f"latest {l_} before earliest {e}", k)
        parsed.append((k, x, y, int(dem), e, l_, svc, int(p_idx), int(d_idx)))
    rows = parsed  # type: ignore[assignment]
    n = len(rows)
    pairs = []
    for k, (_, _, _, dem, _, _, _, p_idx, d_idx) in enumerate(rows[1:], start=1):
        if dem > 0:
            ok = 0 < d_idx < n and rows[d_idx][3] == -dem and rows[d_idx][7] == k
            if not ok:
                raise PdptwInstanceError(where(k), f"pickup {k} has no matching delivery", k)
            pairs.append((k, d_idx))
        elif dem < 0:
            ok = 0 < p_idx < n and rows[p_idx][3] == -dem and rows[p_idx][8] == k
            if not ok:
                raise PdptwInstanceError(where(k), f"delivery {k} has no matching pickup", k)
        else:
            raise PdptwInstanceError(where(k), f"task {k} has zero demand", k)
    a = np.array([r[1:7] for r in rows], dtype=np.float64)
    return PdptwInstance(
        name=name,
        vehicles=vehicles,
        capacity=capacity,
        xy=a[:, 0:2].copy(),
        demand=a[:, 2].astype(np.int64),
        earliest=a[:, 3].copy(),
        latest=a[:, 4].copy(),
        service=a[:, 5].copy(),
        pairs=np.array(pairs, dtype=np.int64).reshape(-1, 2),
    )
