"""An evaluator for PDPTW solutions that shares no code with the solver.

Rules (Li & Lim): distance is unrounded Euclidean and equals travel time; service at a task
starts at max(earliest, arrival) and must start by ``latest``; departure = start + service;
load stays within [0, Q]; a pickup precedes its delivery on the same vehicle; every task is
served exactly once; every route leaves the depot no earlier than its opening and is back by its
closing; no more routes than vehicles. Objective: fewest vehicles, then least total distance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from planner.pdptw.instance import PdptwInstance


@dataclass(frozen=True)
class PdptwEvaluation:
    feasible: bool
    vehicles: int
    distance: float
    violations: list[str] = field(default_factory=list)


def evaluate(inst: PdptwInstance, routes: list[list[int]]) -> PdptwEvaluation:
    """Check ``routes`` (task ids, depot omitted) against ``inst``; lists every violation."""
    problems: list[str] = []
    routes = [r for r in routes if r]
    seen: dict[int, int] = {}
    for v, route in enumerate(routes):
        for task in route:
            if not 0 < task <= inst.n_tasks:
                problems.append(f"route {v + 1}: unknown task {task}")
            elif task in seen:
                problems.append(f"task {task} served twice (routes {seen[task] + 1}, {v + 1})")
            else:
                seen[task] = v
    missing = sorted(set(range(1, inst.n_tasks + 1)) - seen.keys())
    if missing:
        problems.append(f"tasks not served: {missing[:10]}{' ...' if len(missing) > 10 else ''}")
    if len(routes) > inst.vehicles:
        problems.append(f"{len(routes)} routes for {inst.vehicles} vehicles")
    total = 0.0
    for v, route in enumerate(routes):
        t, here, load, pos = inst.earliest[0], 0, 0, {}
        for k, task in enumerate(route):
            if not 0 < task <= inst.n_tasks:
                continue
            pos[task] = k
            d = math.dist(inst.xy[here], inst.xy[task])
            total += d
            start = max(inst.earliest[task], t + d)
            if start > inst.latest[task] + 1e-6:
                problems.append(
                    f"route {v + 1}: task {task} starts {start:.2f} after its "
                    f"latest {inst.latest[task]:.2f}"
                )
            t = start + inst.service[task]
            load += int(inst.demand[task])
            if load > inst.capacity or load < 0:
                problems.append(
                    f"route {v + 1}: load {load} outside [0, {inst.capacity}] after task {task}"
                )
            here = task
        d = math.dist(inst.xy[here], inst.xy[0])
        total += d
        if t + d > inst.latest[0] + 1e-6:
            problems.append(
                f"route {v + 1}: back at the depot at {t + d:.2f}, after {inst.latest[0]:.2f}"
            )
        for p, dl in inst.pairs:
            p, dl = int(p), int(dl)
            if (p in pos) != (dl in pos):
                problems.append(f"route {v + 1}: pickup {p} and delivery {dl} on different routes")
            elif p in pos and pos[p] > pos[dl]:
                problems.append(f"route {v + 1}: delivery {dl} before its pickup {p}")
    return PdptwEvaluation(not problems, len(routes), total, problems)


def write_sintef(routes: list[list[int]], path) -> None:
    """``Route 1 : 12 7 88 ...`` per non-empty route (task ids, depot omitted)."""
    lines = [
        f"Route {k} : {' '.join(map(str, r))}" for k, r in enumerate((r for r in routes if r), 1)
    ]
    from pathlib import Path

    Path(path).write_text("\n".join(lines) + "\n")


def read_sintef(path) -> list[list[int]]:
    """Routes from a SINTEF-format solution file; ValueError naming the line if malformed."""
    from pathlib import Path

    routes = []
    for k, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip():
            continue
        head, sep, tail = line.partition(":")
        if not sep or not head.strip().lower().startswith("route"):
            raise ValueError(f"{path}:{k}: expected 'Route N : ids'")
        routes.append([int(x) for x in tail.split()])
    return routes
