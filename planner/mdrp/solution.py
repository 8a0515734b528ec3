"""A replayed day in the MDRP library's solution format (three files) plus a JSON summary.

``solution_info_assignments.txt``: ``assignment_time pickup_time courier order...`` (a bundle a
line, orders in drop-off order); ``solution_info_orders.txt``: ``order placement_time ready_time
pickup_time dropoff_time courier`` (``nan`` for an undelivered order);
``solution_info_couriers.txt``: ``courier departure_time origin destination``, every move, by
courier and in time order. Fields separated by single spaces, one header line each.
"""

from __future__ import annotations

from pathlib import Path

from planner.mdrp.day import Replay
from planner.mdrp.instance import MdrpInstance

FILES = ("solution_info_assignments.txt", "solution_info_orders.txt", "solution_info_couriers.txt")


def write_solution(instance: MdrpInstance, day: Replay, folder: Path) -> list[Path]:
    """Write the three files into ``folder`` (created); returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    assignments = ["assignment_time pickup_time courier orders"]
    served: dict[str, tuple[int, int, str]] = {}
    for b in day.bundles:
        assignments.append(" ".join([str(b.assigned_at), str(b.pickup), b.courier, *b.orders]))
        for oid, drop in zip(b.orders, b.dropoffs, strict=True):
            served[oid] = (b.pickup, drop, b.courier)
    orders = ["order placement_time ready_time pickup_time dropoff_time courier"]
    for o in sorted(instance.orders, key=lambda o: o.id):
        pickup, drop, courier = served.get(o.id, ("nan", "nan", "nan"))
        orders.append(f"{o.id} {o.placed} {o.ready} {pickup} {drop} {courier}")
    couriers = ["courier departure_time origin destination"]
    rank = {c.id: k for k, c in enumerate(instance.couriers)}
    for m in sorted(day.moves, key=lambda m: rank[m.courier]):  # stable: time order kept
        couriers.append(f"{m.courier} {m.depart} {m.origin} {m.destination}")
    paths = []
    for name, lines in zip(FILES, (assignments, orders, couriers), strict=True):
        path = folder / name
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths
