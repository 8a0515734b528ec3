"""A PDPTW solver on the dispatch kernels: regret insertion, then ruin and recreate.

The Li & Lim problem maps onto ``insertion_costs`` without a fork: a vehicle is a route that
starts at the depot at its opening time and ends at a fixed depot stop (``insert_limit`` keeps
new stops before it) whose hard deadline is the depot's closing; every task's window is a hard
``latest`` and an earliest start (waiting allowed); travel time is distance (speed 1); the cost
is added distance (``late_weight`` 0). Opening a vehicle adds ``vehicle_cost``, so the
hierarchical objective (vehicles, then distance) drives every choice.

* Construction: regret-2 insertion over all routes plus one empty vehicle.
* Improvement until the time limit (or ``iterations``): remove requests (random, a string of
  consecutive stops, or a whole small route, which is what cuts vehicles), reinsert by regret,
  keep the result if it is no worse (vehicles, distance) than the current one, with a small
  chance of accepting a slightly worse distance to escape local minima.

Seeded: the same seed, backend and iteration count give the same answer.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

import numpy as np

from kernels.arrays import OrderArrays, RouteArrays
from kernels.insertion_costs import insertion_costs
from planner.pdptw.instance import Instance

_EPS = 1e-3  # float32 kernels against a float64 evaluator: keep a hair inside every window


@dataclass(frozen=True)
class Solution:
    routes: list[list[int]]
    vehicles: int
    distance: float
    unassigned: list[int]
    iterations: int
    seconds: float


def route_distance(inst: Instance, route: list[int]) -> float:
    path = [0, *route, 0]
    return float(sum(np.hypot(*(inst.xy[a] - inst.xy[b])) for a, b in itertools.pairwise(path)))


def pack_routes(inst: Instance, routes: list[list[int]]) -> RouteArrays:
    """Routes (task ids) plus their fixed depot end, as kernel arrays."""
    n_slots = max([len(r) for r in routes] + [0]) + 1
    ra = RouteArrays.empty(len(routes), n_slots)
    ra.start_xy[:] = inst.xy[0]
    ra.start_time[:] = inst.earliest[0]
    ra.speed[:] = 1.0
    ra.capacity[:] = inst.capacity
    for k, route in enumerate(routes):
        n = len(route)
        stops = np.array([*route, 0], dtype=np.int64)
        ra.stop_xy[k, : n + 1] = inst.xy[stops]
        ra.stop_ready[k, :n] = inst.earliest[stops[:n]]
        ra.stop_latest[k, : n + 1] = inst.latest[stops] - _EPS
        ra.stop_service[k, :n] = inst.service[stops[:n]]
        ra.stop_load[k, :n] = inst.demand[stops[:n]]
        ra.n_stops[k] = n + 1
        ra.insert_limit[k] = n
    return ra.check()


def pack_requests(inst: Instance, pairs: np.ndarray) -> OrderArrays:
    p, d = pairs[:, 0], pairs[:, 1]
    f = np.float32
    return OrderArrays(
        pickup_xy=inst.xy[p].astype(f),
        dropoff_xy=inst.xy[d].astype(f),
        ready=inst.earliest[p].astype(f),
        pickup_latest=(inst.latest[p] - _EPS).astype(f),
        due=np.full(len(p), np.inf, f),
        dropoff_latest=(inst.latest[d] - _EPS).astype(f),
        dropoff_ready=inst.earliest[d].astype(f),
        pickup_service=inst.service[p].astype(f),
        dropoff_service=inst.service[d].astype(f),
        size=inst.demand[p].astype(f),
        has_pickup=np.ones(len(p), bool),
    ).check()


def regret_insert(
    inst: Instance,
    routes: list[list[int]],
    requests: list[int],
    vehicle_cost: float,
    rng: np.random.Generator,
) -> tuple[list[list[int]], list[int]]:
    """Insert requests (indices into ``inst.pairs``) by regret-2; returns (routes, left over).

    The cost matrix [routes (+ one empty vehicle), requests] is priced once; after each
    insertion only the changed route's row is priced again (the others are unchanged), and the
    inserted request's column is dropped.
    """
    routes = [list(r) for r in routes if r]
    todo = list(requests)
    if not todo:
        return routes, []
    orders = pack_requests(inst, inst.pairs[todo])

    def price(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ins = insertion_costs(pack_routes(inst, rows), orders, late_weight=0.0)
        return ins.cost.astype(np.float64), ins.pickup_pos, ins.dropoff_pos

    has_empty = len(routes) < inst.vehicles
    cost, pos_i, pos_j = price(routes + ([[]] if has_empty else []))
    if has_empty:
        cost[-1] += vehicle_cost
    alive = np.ones(len(todo), bool)
    while alive.any():
        live = np.nonzero(alive)[0]
        sub = cost[:, live]
        if not np.isfinite(sub).any():
            break
        ordered = np.sort(sub, axis=0)
        best = ordered[0]
        second = ordered[1] if sub.shape[0] > 1 else np.full_like(best, np.inf)
        regret = np.where(np.isfinite(best), np.minimum(second - best, 1e12), -np.inf)
        # Highest regret first; ties broken by a seeded jitter so runs are reproducible.
        pick = int(live[np.argmax(regret + rng.random(len(live)) * 1e-6)])
        r = int(np.argmin(cost[:, pick]))
        i, j = int(pos_i[r, pick]), int(pos_j[r, pick])
        p, d = (int(x) for x in inst.pairs[todo[pick]])
        stops = routes[r] if r < len(routes) else []
        new = [*stops[:i], p, *stops[i:j], d, *stops[j:]]
        alive[pick] = False
        opened = r == len(routes)
        if opened:
            routes.append(new)
        else:
            routes[r] = new
        row_c, row_i, row_j = price([new])
        if opened and len(routes) < inst.vehicles:
            # The empty vehicle became route r; a fresh empty one prices as the old one did.
            cost = np.vstack([cost[:r], row_c, cost[r:]])
            pos_i = np.vstack([pos_i[:r], row_i, pos_i[r:]])
            pos_j = np.vstack([pos_j[:r], row_j, pos_j[r:]])
        else:
            cost[r], pos_i[r], pos_j[r] = row_c[0], row_i[0], row_j[0]
    left = [todo[k] for k in np.nonzero(alive)[0]]
    return routes, left


def _objective(inst: Instance, routes: list[list[int]]) -> tuple[int, float]:
    return len([r for r in routes if r]), sum(route_distance(inst, r) for r in routes)


def _remove(
    inst: Instance, routes: list[list[int]], rng: np.random.Generator, pair_of: dict[int, int]
) -> tuple[list[list[int]], list[int]]:
    kind = rng.choice(["random", "string", "route"], p=[0.4, 0.4, 0.2])
    n_req = len(inst.pairs)
    if kind == "route" and len(routes) > 1:
        sizes = np.array([len(r) for r in routes], dtype=np.float64)
        weights = 1.0 / sizes
        victim = int(rng.choice(len(routes), p=weights / weights.sum()))
        removed = sorted({pair_of[t] for t in routes[victim]})
    elif kind == "string":
        r = int(rng.integers(len(routes)))
        start = int(rng.integers(len(routes[r])))
        length = int(rng.integers(2, 11))
        removed = sorted({pair_of[t] for t in routes[r][start : start + length]})
    else:
        q = int(rng.integers(2, max(3, min(16, n_req // 4))))
        removed = sorted(rng.choice(n_req, size=min(q, n_req), replace=False).tolist())
    tasks = {int(t) for k in removed for t in inst.pairs[k]}
    return [[t for t in r if t not in tasks] for r in routes], removed


def solve(
    inst: Instance, *, time_limit_s: float, seed: int = 0, iterations: int | None = None
) -> Solution:
    """Solve within ``time_limit_s`` (and at most ``iterations`` improvement steps)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    vehicle_cost = 10.0 * float(np.ptp(inst.xy, axis=0).sum()) * max(1, inst.n_tasks)
    pair_of = {int(t): k for k, pair in enumerate(inst.pairs) for t in pair}
    routes, left = regret_insert(inst, [], list(range(len(inst.pairs))), vehicle_cost, rng)
    current = best = routes
    cur_obj = best_obj = _objective(inst, routes)
    done = 0
    while not left and time.perf_counter() - t0 < time_limit_s:
        if iterations is not None and done >= iterations:
            break
        done += 1
        partial, removed = _remove(inst, current, rng, pair_of)
        cand, rest = regret_insert(inst, partial, removed, vehicle_cost, rng)
        if rest:
            continue
        obj = _objective(inst, cand)
        worse_ok = obj[0] == cur_obj[0] and obj[1] < cur_obj[1] * 1.01 and rng.random() < 0.05
        if obj <= cur_obj or worse_ok:
            current, cur_obj = cand, obj
            if obj < best_obj:
                best, best_obj = cand, obj
    return Solution(
        routes=[r for r in best if r],
        vehicles=best_obj[0],
        distance=best_obj[1],
        unassigned=sorted({int(t) for k in left for t in inst.pairs[k]}),
        iterations=done,
        seconds=time.perf_counter() - t0,
    )
