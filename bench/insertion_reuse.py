"""Does reusing (rider route, order) insertion results across consecutive rounds pay off?

    python bench/insertion_reuse.py [--quick] [--json PATH] [--out DIR]

Consecutive dispatch rounds mostly repeat: the same riders, most routes unchanged, the same
pending orders. Two ways to price round t+1, measured in the same run on the same rounds:

* recompute: ``insertion_costs`` over every pair (the NumPy kernel);
* reuse: look up each (route, order) pair in an L1 cache keyed by the canonical route and order
  (``cache.keys``), price only the misses with the kernel in pair mode, store them.

The second round keeps ``--unchanged`` of the routes and all the orders of the first.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser

from cache import L1Cache, cache_key, decode, encode
from kernels.insertion_costs import insertion_costs
from planner import generate_round, pack_round


def route_rows(routes) -> list[tuple]:
    """A hashable description of each route (what its insertion prices depend on)."""
    return [
        tuple(
            np.concatenate(
                [
                    routes.start_xy[r],
                    [routes.start_time[r], routes.speed[r], routes.capacity[r], routes.load0[r]],
                    routes.stop_xy[r, : routes.n_stops[r]].ravel(),
                    routes.stop_ready[r, : routes.n_stops[r]],
                    routes.stop_due[r, : routes.n_stops[r]],
                ]
            )
            .round(3)
            .tolist()
        )
        for r in range(routes.shape[0])
    ]


def order_rows(orders) -> list[tuple]:
    return [
        tuple(
            np.concatenate(
                [
                    orders.pickup_xy[o],
                    orders.dropoff_xy[o],
                    [orders.ready[o], orders.due[o], orders.size[o]],
                ]
            )
            .round(3)
            .tolist()
        )
        for o in range(len(orders))
    ]


def reuse_pass(l1: L1Cache, routes, orders, order_keys: list[tuple], w: float) -> int:
    """Price every pair from the cache, the misses with the kernel; returns the miss count."""
    rk = route_rows(routes)
    n = len(orders)
    keys = [
        cache_key("ins", "1", [rk[r], order_keys[o]])
        for r in range(routes.shape[0])
        for o in range(n)
    ]
    miss = [k for k, key in enumerate(keys) if l1.get(key) is None]
    if miss:
        idx = np.array(miss)
        got = insertion_costs(
            routes.take(idx // n), orders.take(idx % n), late_weight=w, pairs=True
        )
        for k, c in zip(miss, got.cost.tolist(), strict=True):
            l1.set(keys[k], encode(c))
    decode(l1.get(keys[0]))
    return len(miss)


def measure(n_riders: int, n_orders: int, unchanged: float, reps: int) -> dict:
    packed = pack_round(generate_round(n_riders, n_orders, seed=3, route_stops=(0, 12)))
    nxt = pack_round(generate_round(n_riders, n_orders, seed=4, route_stops=(0, 12)))
    changed = np.random.default_rng(0).random(n_riders) > unchanged
    # Round t+1: the same orders; routes kept except the changed ones.
    routes2 = packed.routes.take(np.arange(n_riders))
    for name in routes2.__dataclass_fields__:
        a, b = getattr(routes2, name), getattr(nxt.routes, name)
        if a.ndim >= 2 and a.shape[1] != b.shape[1]:
            continue
        a[changed] = b[changed]
    routes2 = routes2.check()
    orders, w = packed.orders, 4.0
    keys = order_rows(orders)
    t_re = []
    for _ in range(reps):
        t0 = time.perf_counter()
        insertion_costs(routes2, orders, late_weight=w)
        t_re.append(time.perf_counter() - t0)
    l1 = L1Cache(512 << 20, 600, "lru")
    reuse_pass(l1, packed.routes, orders, keys, w)  # round t fills the cache
    t0 = time.perf_counter()
    misses = reuse_pass(l1, routes2, orders, keys, w)  # round t+1: changed routes miss
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    reuse_pass(l1, routes2, orders, keys, w)  # the best case: every pair hits
    t_all_hits = time.perf_counter() - t0
    return {
        "size": f"{n_riders}x{n_orders}",
        "pairs": n_riders * n_orders,
        "unchanged_routes": float(1 - changed.mean()),
        "recompute_ms": statistics.median(t_re) * 1e3,
        "reuse_ms": t_first * 1e3,
        "reuse_all_hits_ms": t_all_hits * 1e3,
        "misses": misses,
    }


def main() -> None:
    ap = parser(__doc__, "one small size")
    ap.add_argument("--unchanged", type=float, default=0.9)
    args = ap.parse_args()
    sizes = [(200, 60)] if args.quick else [(200, 60), (1000, 300)]
    rows = []
    for n_riders, n_orders in sizes:
        rows.append(measure(n_riders, n_orders, args.unchanged, 3 if args.quick else 5))
        log(f"  {rows[-1]}")
    print(
        f"\n{'size':>9} {'pairs':>7} {'unchanged':>9} {'recompute ms':>12} {'reuse ms':>9} "
        f"{'all hits ms':>11}"
    )
    for r in rows:
        print(
            f"{r['size']:>9} {r['pairs']:>7} {r['unchanged_routes']:>9.2f} "
            f"{r['recompute_ms']:>12.1f} {r['reuse_ms']:>9.1f} {r['reuse_all_hits_ms']:>11.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
