"""Seeded adversarial kernel inputs: arbitrary valid arrays, not only what the generator makes.

Covers empty routes, already-late stops, hard and soft deadlines, riders at capacity, orders
already on board (no pickup), routes that end at a fixed depot, and all-infeasible batches.
"""

from __future__ import annotations

import numpy as np

from kernels.arrays import OrderArrays, RouteArrays


def random_batch(
    seed: int, n_routes: int, n_orders: int, n_slots: int, *, tight: bool = False
) -> tuple[RouteArrays, OrderArrays]:
    rng = np.random.default_rng(seed)
    f = np.float32
    routes = RouteArrays.empty(n_routes, n_slots)
    extent = 3000.0
    routes.start_xy[:] = rng.uniform(-extent, extent, (n_routes, 2))
    routes.start_time[:] = rng.uniform(0, 120, n_routes)
    routes.speed[:] = rng.uniform(3, 8, n_routes)
    routes.capacity[:] = rng.integers(1, 5, n_routes)
    n_stops = rng.integers(0, n_slots + 1, n_routes).astype(np.int32)
    routes.n_stops[:] = n_stops
    fixed_end = rng.random(n_routes) < 0.2
    for r in range(n_routes):
        n = int(n_stops[r])
        routes.stop_xy[r, :n] = rng.uniform(-extent, extent, (n, 2))
        kinds = rng.random(n)
        for q in range(n):
            if kinds[q] < 0.4:  # pickup-like: a ready time, sometimes a hard latest
                routes.stop_ready[r, q] = rng.uniform(0, 1500)
                routes.stop_load[r, q] = 1
                if rng.random() < 0.3:
                    routes.stop_latest[r, q] = rng.uniform(0, 3000)
            else:  # drop-off-like: a due time (some already passed) and a hard latest
                due = rng.uniform(-300, 3000 if not tight else 800)
                routes.stop_due[r, q] = due
                routes.stop_latest[r, q] = due + rng.choice([0, 600, np.inf])
                routes.stop_load[r, q] = -1
            routes.stop_service[r, q] = rng.choice([0.0, 60.0])
        routes.load0[r] = max(0.0, -float(np.cumsum(routes.stop_load[r, :n]).min(initial=0)))
        routes.capacity[r] = max(
            float(routes.capacity[r]),
            float(routes.load0[r]) + float(np.cumsum(routes.stop_load[r, :n]).max(initial=0)),
        )
        if rng.random() < 0.2:  # a rider already full on some leg
            routes.capacity[r] = float(
                routes.load0[r] + np.cumsum(routes.stop_load[r, :n]).max(initial=0)
            )
        routes.insert_limit[r] = n - 1 if (fixed_end[r] and n > 0) else n
    orders = OrderArrays(
        pickup_xy=rng.uniform(-extent, extent, (n_orders, 2)).astype(f),
        dropoff_xy=rng.uniform(-extent, extent, (n_orders, 2)).astype(f),
        ready=rng.uniform(0, 1200, n_orders).astype(f),
        pickup_latest=np.where(
            rng.random(n_orders) < 0.3, rng.uniform(0, 2500, n_orders), np.inf
        ).astype(f),
        due=rng.uniform(600 if not tight else 0, 3000, n_orders).astype(f),
        dropoff_latest=np.where(
            rng.random(n_orders) < 0.5, np.inf, rng.uniform(1500, 4000, n_orders)
        ).astype(f),
        dropoff_ready=np.where(
            rng.random(n_orders) < 0.3, rng.uniform(0, 2500, n_orders), -np.inf
        ).astype(f),
        pickup_service=rng.choice([0.0, 60.0], n_orders).astype(f),
        dropoff_service=rng.choice([0.0, 60.0], n_orders).astype(f),
        size=rng.choice([1.0, 2.0], n_orders).astype(f),
        has_pickup=rng.random(n_orders) < 0.8,
    )
    return routes.check(), orders.check()


def contested_prices(
    seed: int, orders: tuple[int, int] = (5, 16), spare: tuple[int, int] = (0, 10)
) -> tuple[np.ndarray, np.ndarray]:
    """An assignment whose riders are contested: float32 prices [R, O] (O drawn from
    ``orders``, R = O + a draw from ``spare``; riders and orders on a line, so near orders
    want the same riders; a third of the cases rounded to ties; some pairs and some whole
    orders infeasible) and valid lower bounds on them, from exact to loose, some infeasible
    pairs bounded at 0. Ranges are half-open, as ``Generator.integers``."""
    rng = np.random.default_rng(seed)
    n_orders = int(rng.integers(*orders))
    n_riders = n_orders + int(rng.integers(*spare))
    noise = rng.uniform(0, rng.choice([1, 50, 300]), (n_riders, n_orders))
    cost = np.abs(rng.uniform(0, 1000, n_riders)[:, None] - rng.uniform(0, 1000, n_orders)) + noise
    if rng.random() < 0.3:
        cost = np.round(cost / 100) * 100
    cost[rng.random(cost.shape) < rng.uniform(0, 0.1)] = np.inf
    if rng.random() < 0.2:
        cost[:, rng.integers(n_orders)] = np.inf
    cost = cost.astype(np.float32)
    exact = rng.random(cost.shape) >= rng.uniform(0, 1)
    loose = np.where(exact, 1.0, rng.uniform(0, 1, cost.shape) ** 2)
    unbounded = np.where(rng.random(cost.shape) < 0.5, np.inf, 0.0)
    bound = np.where(np.isfinite(cost), cost * loose, unbounded).astype(np.float32)
    return cost, bound
