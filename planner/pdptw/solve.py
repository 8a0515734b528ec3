"""A PDPTW solver on the dispatch kernels: regret insertion, then ruin and recreate.

The Li & Lim problem maps onto ``insertion_costs`` without a fork: a vehicle is a route that
starts at the depot at its opening time and ends at a fixed depot stop (``insert_limit`` keeps
new stops before it) whose hard deadline is the depot's closing; every task's window is a hard
``latest`` and an earliest start (waiting allowed); travel time is distance (speed 1); the cost
is added distance (``late_weight`` 0). Opening a vehicle adds ``vehicle_cost``, so the
hierarchical objective (vehicles, then distance) drives every choice.

* Construction: regret-2 insertion over all routes plus one empty vehicle.
* Vehicle elimination (up to ``VEHICLE_SHARE`` of the budget): take a short route's
  requests out into a pool and run ruin and recreate with the fleet capped at one vehicle
  fewer; a step is kept when the pool's summed penalty (each request's count of steps it was
  left out) does not grow (then by distance). An empty pool is a solution with one vehicle
  fewer, and the next route goes. An attempt that makes no progress for ``patience`` steps
  gives up that route and the next attempt empties another.
* Distance (the rest of the budget): ruin and recreate at a fixed fleet with simulated
  annealing (temperature falling geometrically with the budget spent); half of the recreates
  are greedy in random order instead of regret, for diversity (without them the long-route
  lc2/lr2 instances stall 8-16% above the best known).

Ruins, each picked at random: adjacent strings of stops cut from several routes near a seed
(the SISR idea, Christiaens & Vanden Berghe 2020), the requests most related to a seed (close
pickups and close deliveries: Shaw removal), or random requests. Recreate is regret-2
insertion, pricing every route-request pair on the kernel and re-pricing only the changed route.

Seeded: the same seed, backend and ``iterations`` give the same answer (progress is then
measured in steps, not seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kernels.arrays import OrderArrays, RouteArrays
from kernels.insertion_costs import insertion_costs
from planner.pdptw.instance import PdptwInstance

_EPS = 1e-3  # float32 kernels against a float64 evaluator: keep a hair inside every window


@dataclass(frozen=True)
class Solution:
    routes: list[list[int]]
    vehicles: int
    distance: float
    unassigned: list[int]
    iterations: int
    seconds: float


def route_distance(inst: PdptwInstance, route: list[int]) -> float:
    """Depot -> route -> depot, unrounded Euclidean."""
    path = inst.xy[[0, *route, 0]]
    return float(np.hypot(*np.diff(path, axis=0).T).sum())


def pack_routes(inst: PdptwInstance, routes: list[list[int]]) -> RouteArrays:
    """Routes (task ids) plus their fixed depot end, as kernel arrays."""
    n_slots = max([len(r) for r in routes] + [0]) + 1
    ra = RouteArrays.empty(len(routes), n_slots)
    ra.start_xy[:] = inst.xy[0]
    ra.start_time[:] = inst.earliest[0]
    ra.capacity[:] = inst.capacity
    n = np.array([len(r) for r in routes], dtype=np.int32)
    # Every route as task ids padded with the depot (0): the depot end sits at slot n[k].
    stops = np.zeros((len(routes), n_slots), dtype=np.int64)
    for k, route in enumerate(routes):
        stops[k, : n[k]] = route
    task = np.arange(n_slots)[None, :] < n[:, None]
    used = np.arange(n_slots)[None, :] <= n[:, None]
    ra.stop_xy[:] = inst.xy[stops]
    ra.stop_ready[:] = np.where(task, inst.earliest[stops], -np.inf)
    ra.stop_latest[:] = np.where(used, inst.latest[stops] - _EPS, np.inf)
    ra.stop_service[:] = np.where(task, inst.service[stops], 0)
    ra.stop_load[:] = np.where(task, inst.demand[stops], 0)
    ra.n_stops[:] = n + 1
    ra.insert_limit[:] = n
    return ra.check()


def pack_requests(inst: PdptwInstance, pairs: np.ndarray) -> OrderArrays:
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
    inst: PdptwInstance,
    routes: list[list[int]],
    requests: list[int],
    vehicle_cost: float,
    rng: np.random.Generator,
    max_vehicles: int | None = None,
    greedy: bool = False,
    clock: _Clock | None = None,
) -> tuple[list[list[int]], list[int]]:
    """Insert requests (indices into ``inst.pairs``) by regret-2; returns (routes, left over).

    No more than ``max_vehicles`` (default: the instance's fleet) routes are used; what fits
    nowhere is left over. ``greedy`` inserts in the given order instead, each request at its
    cheapest place: weaker than regret alone, but it reaches solutions regret never builds.
    ``clock``: once it has expired no further request is inserted (they are left over), so
    even the first construction of a large instance ends within one insertion of the limit
    (each call inserts one request at least: every call makes progress).

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

    fleet = inst.vehicles if max_vehicles is None else min(max_vehicles, inst.vehicles)
    has_empty = len(routes) < fleet
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
        with np.errstate(invalid="ignore"):  # inf - inf where nothing fits: masked just below
            regret = np.where(np.isfinite(best), np.minimum(second - best, 1e12), -np.inf)
        if greedy:
            pick = int(live[np.argmax(np.isfinite(best))])
        else:
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
        if opened and len(routes) < fleet:
            # The empty vehicle became route r; a fresh empty one prices as the old one did.
            cost = np.vstack([cost[:r], row_c, cost[r:]])
            pos_i = np.vstack([pos_i[:r], row_i, pos_i[r:]])
            pos_j = np.vstack([pos_j[:r], row_j, pos_j[r:]])
        else:
            cost[r], pos_i[r], pos_j[r] = row_c[0], row_i[0], row_j[0]
        if clock is not None and clock.expired():
            break
    left = [todo[k] for k in np.nonzero(alive)[0]]
    return routes, left


VEHICLE_SHARE = 0.5  # of the budget, at most, spent cutting vehicles
#: Of the budget, what attempts that fail at one fleet size may spend before the phase ends
#: (the rest then goes to distance; tuned on the Li & Lim 100-task set at 10 s,
#: bench/pdptw.py: fewer retries leave vehicles, more leave distance).
FAILING_SHARE = 0.15
#: Of the budget, the most one attempt may spend.
ATTEMPT_SHARE = 0.15
RUIN_MEAN = 10  # requests a ruin removes on average (SISR's c-bar)
STRING_MAX = 10  # longest string cut from one route (SISR's L-max)
GREEDY_SHARE = 0.5  # of distance steps that recreate greedily, in random order, not by regret


def _objective(inst: PdptwInstance, routes: list[list[int]]) -> tuple[int, float]:
    return len([r for r in routes if r]), sum(route_distance(inst, r) for r in routes)


@dataclass(frozen=True)
class _Ruins:
    """What the ruins read: the request of every task, and requests ordered by relatedness."""

    pairs: np.ndarray  # int64[P, 2], as in the instance
    pair_of: dict[int, int]
    related: np.ndarray  # int64[P, P]: row k = requests by pickup + delivery distance to k

    @classmethod
    def of(cls, inst: PdptwInstance) -> _Ruins:
        p, d = inst.xy[inst.pairs[:, 0]], inst.xy[inst.pairs[:, 1]]
        dist = np.hypot(*(p[:, None] - p[None]).transpose(2, 0, 1)) + np.hypot(
            *(d[:, None] - d[None]).transpose(2, 0, 1)
        )
        pair_of = {int(t): k for k, pair in enumerate(inst.pairs) for t in pair}
        return cls(inst.pairs, pair_of, np.argsort(dist, axis=1, kind="stable"))

    def strings(self, routes: list[list[int]], rng: np.random.Generator) -> set[int]:
        """SISR: strings of adjacent stops from routes visited in order of a seed's neighbours."""
        lengths = [len(r) for r in routes if r]
        l_max = min(STRING_MAX, float(np.mean(lengths)))
        k_max = 4 * RUIN_MEAN / (1 + l_max) - 1
        n_strings = int(rng.uniform(1, k_max + 1))
        route_of = {t: k for k, r in enumerate(routes) for t in r}
        removed: set[int] = set()
        cut: set[int] = set()
        seed = int(rng.integers(len(self.related)))
        for req in self.related[seed]:
            if len(cut) >= n_strings:
                break
            task = int(self.pairs[req, 0])
            k = route_of.get(task)
            if k is None or k in cut:
                continue
            route = routes[k]
            length = int(rng.integers(1, min(l_max, len(route)) + 1))
            at = route.index(task)
            start = int(rng.integers(max(0, at - length + 1), min(at, len(route) - length) + 1))
            removed.update(self.pair_of[t] for t in route[start : start + length])
            cut.add(k)
        return removed

    def related_to_seed(self, rng: np.random.Generator, n: int) -> set[int]:
        """Shaw: a random request and the n-1 requests nearest to it, pickup and delivery."""
        seed = int(rng.integers(len(self.related)))
        return {int(k) for k in self.related[seed][:n]}

    def ruin(
        self, routes: list[list[int]], rng: np.random.Generator
    ) -> tuple[list[list[int]], list[int]]:
        n_req = len(self.related)
        # Instances with fewer requests than a ruin's usual minimum ruin all of them at most.
        low = min(max(1, RUIN_MEAN // 2), n_req)
        n = int(rng.integers(low, min(2 * RUIN_MEAN, n_req) + 1))
        kind = rng.random()
        if kind < 0.5:
            removed = self.strings(routes, rng)
        elif kind < 0.8:
            removed = self.related_to_seed(rng, n)
        else:
            removed = {int(k) for k in rng.choice(n_req, size=min(n, n_req), replace=False)}
        gone = {int(t) for t in self.pairs[sorted(removed)].ravel()}
        return [[t for t in r if t not in gone] for r in routes], sorted(removed)


class _Clock:
    """Progress in [0, 1]: time spent over the limit, or steps over ``iterations`` if given.

    yield_to : called at every step and insertion (``out_of_time``, ``expired``); returns the
    seconds it waited, which do not count against the limit (the solve stepped aside for other
    work).
    checkpoint : called at every step and insertion (``expired``); raises to abandon the solve
    (its caller has gone).
    """

    def __init__(
        self,
        time_limit_s: float,
        iterations: int | None,
        yield_to: Callable[[], float] | None = None,
        checkpoint: Callable[[], None] | None = None,
    ) -> None:
        self.t0 = time.perf_counter()
        self.limit = time_limit_s
        self.iterations = iterations
        self.steps = 0
        self.yield_to = yield_to
        self.checkpoint = checkpoint
        self.waited_s = 0.0

    def expired(self) -> bool:
        """Past the time limit; between insertions, so it steps aside too: a construction is
        hundreds of insertions (0.5 s on lc101), one insertion a few milliseconds, and an
        online round should wait for the latter only (bench/priority.py measures the gaps)."""
        if self.checkpoint is not None:
            self.checkpoint()
        self._step_aside()
        return time.perf_counter() - self.t0 >= self.limit

    def _step_aside(self) -> None:
        if self.yield_to is not None:
            waited = self.yield_to()
            self.t0 += waited
            self.waited_s += waited

    def progress(self) -> float:
        if self.iterations is not None:
            return min(1.0, self.steps / max(1, self.iterations))
        return min(1.0, (time.perf_counter() - self.t0) / self.limit)

    def out_of_time(self) -> bool:
        if self.checkpoint is not None:
            self.checkpoint()
        self._step_aside()
        return time.perf_counter() - self.t0 >= self.limit or (
            self.iterations is not None and self.steps >= self.iterations
        )


def _eliminate_vehicles(
    inst: PdptwInstance,
    routes: list[list[int]],
    ruins: _Ruins,
    rng: np.random.Generator,
    clock: _Clock,
    vehicle_cost: float,
) -> list[list[int]]:
    """Cut vehicles one at a time while the phase's share of the budget lasts.

    An attempt empties one route into a pool and runs ruin and recreate at one vehicle fewer.
    Each request left in the pool after a step gains a penalty (how often it would not fit:
    the ejection pool's counters of Nagata & Braysy's route minimisation), and a step is kept
    when the pool's summed penalty does not grow (then by distance), so the search trades
    requests that fit easily for those that do not. An attempt that finds no smaller pool than
    before for ``patience`` steps, or has spent ``ATTEMPT_SHARE`` of the budget, gives up that
    route; the next attempt empties another, until failed attempts at one fleet size have spent
    ``FAILING_SHARE`` of the budget or the phase its share."""
    best = [r for r in routes if r]
    demand = float(inst.demand[inst.demand > 0].sum())
    floor = max(1, int(np.ceil(demand / inst.capacity - 1e-9)))
    patience = max(200, 4 * len(inst.pairs))
    penalty = np.ones(len(inst.pairs))
    failing = 0.0  # of the budget, spent in failed attempts at this fleet size
    while (
        len(best) > floor
        and failing < FAILING_SHARE
        and clock.progress() < VEHICLE_SHARE
        and not clock.out_of_time()
    ):
        started = clock.progress()
        fleet = len(best) - 1
        sizes = np.array([len(r) for r in best], dtype=np.float64)
        victim = int(rng.choice(len(best), p=(1 / sizes) / (1 / sizes).sum()))
        pool = sorted({ruins.pair_of[t] for t in best[victim]})
        current = [r for k, r in enumerate(best) if k != victim]
        current, pool = regret_insert(inst, current, pool, vehicle_cost, rng, fleet, clock=clock)
        cur_dist = _objective(inst, current)[1]
        stale, fewest = 0, len(pool)
        until = min(VEHICLE_SHARE, started + ATTEMPT_SHARE)
        while pool and stale < patience and clock.progress() < until:
            if clock.out_of_time():  # with ``iterations`` given, progress counts steps, not time
                break
            clock.steps += 1
            stale += 1
            partial, removed = ruins.ruin(current, rng)
            cand, left = regret_insert(
                inst, partial, removed + pool, vehicle_cost, rng, fleet, clock=clock
            )
            penalty[left] += 1.0
            weight, was = float(penalty[left].sum()), float(penalty[pool].sum())
            dist = _objective(inst, cand)[1]
            if weight < was or (weight == was and dist <= cur_dist * 1.02):
                current, pool, cur_dist = cand, left, dist
                if len(pool) < fewest:  # progress: a pool smaller than any before
                    stale, fewest = 0, len(pool)
        if pool:
            failing += clock.progress() - started
        else:
            best, failing = [r for r in current if r], 0.0
    return best


def _improve_distance(
    inst: PdptwInstance,
    routes: list[list[int]],
    ruins: _Ruins,
    rng: np.random.Generator,
    clock: _Clock,
    vehicle_cost: float,
) -> list[list[int]]:
    """Ruin and recreate at a fixed fleet; simulated annealing on distance."""
    current = best = routes
    fleet = len(routes)
    cur = best_dist = _objective(inst, routes)[1]
    if cur <= 0:  # every stop at the depot: no distance to save (and no temperature scale)
        return [r for r in routes if r]
    # Temperatures in distance units, from three average legs down to a hundredth of one
    # (tuned on the Li & Lim 100-task set at 10 s: bench/pdptw.py).
    leg = cur / max(1, inst.n_tasks + fleet)
    t_hot, t_cold = 3.0 * leg, 0.01 * leg
    start = clock.progress()
    while not clock.out_of_time():
        clock.steps += 1
        partial, removed = ruins.ruin(current, rng)
        greedy = rng.random() < GREEDY_SHARE
        if greedy:
            removed = [int(k) for k in rng.permutation(removed)]
        cand, left = regret_insert(
            inst, partial, removed, vehicle_cost, rng, fleet, greedy, clock=clock
        )
        if left:
            continue
        dist = _objective(inst, cand)[1]
        frac = (clock.progress() - start) / max(1e-9, 1 - start)
        temp = t_hot * (t_cold / t_hot) ** frac
        if dist < cur - temp * np.log(rng.random()):
            current, cur = cand, dist
            if dist < best_dist:
                best, best_dist = cand, dist
    return [r for r in best if r]


def solve(
    inst: PdptwInstance,
    *,
    time_limit_s: float,
    seed: int = 0,
    iterations: int | None = None,
    yield_to: Callable[[], float] | None = None,
    checkpoint: Callable[[], None] | None = None,
) -> Solution:
    """Solve within ``time_limit_s`` (and at most ``iterations`` improvement steps).

    The limit holds from the first insertion on: a construction still running at the limit
    stops there, and the requests it did not place are ``unassigned``. It is overrun by at
    most one insertion or one ruin-and-recreate step (``bench/hostile.py`` measures it).
    yield_to : called between improvement steps (an offline solve sharing a device lets online
    work go first there); returns the seconds it waited, not counted against the limit.
    checkpoint : called between steps and insertions; what it raises ends the solve (a
    replica whose caller has given up stops computing).
    """
    clock = _Clock(time_limit_s, iterations, yield_to, checkpoint)
    rng = np.random.default_rng(seed)
    vehicle_cost = 10.0 * float(np.ptp(inst.xy, axis=0).sum()) * max(1, inst.n_tasks)
    routes, left = regret_insert(
        inst, [], list(range(len(inst.pairs))), vehicle_cost, rng, clock=clock
    )
    if not left and inst.pairs.size:
        ruins = _Ruins.of(inst)
        routes = _eliminate_vehicles(inst, routes, ruins, rng, clock, vehicle_cost)
        routes = _improve_distance(inst, routes, ruins, rng, clock, vehicle_cost)
    vehicles, distance = _objective(inst, routes)
    return Solution(
        routes=[r for r in routes if r],
        vehicles=vehicles,
        distance=distance,
        unassigned=sorted({int(t) for k in left for t in inst.pairs[k]}),
        iterations=clock.steps,
        seconds=time.perf_counter() - clock.t0,  # computing, not waiting (see yield_to)
    )
