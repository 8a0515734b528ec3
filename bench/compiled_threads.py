"""Benchmark online rounds beside offline work in another thread of the same process, as a
solver replica serves both: the compiled CPU kernels holding the GIL against releasing it.

The online thread solves a 100 x 20 round every 10 ms and times each; a second thread runs the
offline work back to back. Offline work: the exact assignment of a big round (the longest
single compiled call, ~1 s at 1500 x 1500), and a whole 3000 x 1000 ``solve_round``. The
baseline is the same kernels compiled to hold the GIL (Numba's default), built here from the
shipped kernels' own Python source, so the two differ in that flag alone.

    python bench/compiled_threads.py [--quick] [--json PATH] [--out DIR]
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from domain import DispatchWeights
from kernels import _assign_jit
from planner import generate_round
from planner.dispatch_round import round_arrays, solve_round


def gil_holding_assignment() -> Callable[[np.ndarray], np.ndarray]:
    """The shipped assignment's source compiled as Numba does by default: holding the GIL."""
    from numba import njit

    return njit(nogil=False, error_model="numpy")(_assign_jit.shortest_augmenting_path_jit.py_func)


def online_beside(offline: Callable[[], object] | None, seconds: float) -> dict:
    _, small = round_arrays(generate_round(100, 20, seed=2))
    weights = DispatchWeights()
    stop = threading.Event()
    done: list[float] = []

    def flood() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            offline()
            done.append(time.perf_counter() - t0)

    flooder = threading.Thread(target=flood, daemon=True) if offline else None
    if flooder:
        flooder.start()
    latencies = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter()
        solve_round(small, weights)
        latencies.append((time.perf_counter() - t0) * 1e3)
        time.sleep(max(0.0, 0.01 - (time.perf_counter() - t0)))
    stop.set()
    if flooder:
        flooder.join()
    return {
        "online_calls": len(latencies),
        "online_p50_ms": float(np.percentile(latencies, 50)),
        "online_p99_ms": float(np.percentile(latencies, 99)),
        "online_max_ms": float(max(latencies)),
        "offline_calls": len(done),
        "offline_median_s": statistics.median(done) if done else None,
    }


def main() -> None:
    args = parser(__doc__, "smaller offline work, 4 s per case").parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = 4.0 if args.quick else 12.0
    n = 1000 if args.quick else 1500
    cost = np.random.default_rng(0).uniform(0, 1000, (n, n))
    holding = gil_holding_assignment()
    releasing = _assign_jit.shortest_augmenting_path_jit
    holding(cost[:4, :4].copy())
    releasing(cost[:4, :4].copy())
    _, big = round_arrays(generate_round(*((1500, 500) if args.quick else (3000, 1000)), seed=1))
    weights = DispatchWeights()
    solve_round(big, weights)  # warm
    cases = [
        ("online alone", None),
        (f"beside {n}x{n} assignments, GIL held (before)", lambda: holding(cost)),
        (f"beside {n}x{n} assignments, GIL released", lambda: releasing(cost)),
        (
            f"beside {big.routes.shape[0]}x{len(big.orders)} solve_round",
            lambda: solve_round(big, weights),
        ),
    ]
    rows = []
    for name, offline in cases:
        row = {"case": name, **online_beside(offline, seconds)}
        log(f"  {name}: {row}")
        rows.append(row)
    alone = rows[0]["online_p99_ms"]
    print(f"\nonline 100 x 20 rounds every 10 ms, {seconds:.0f} s per case (2-core box)")
    print(f"{'case':>48} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'p99/alone':>9} {'offline':>8}")
    for r in rows:
        r["p99_vs_alone"] = r["online_p99_ms"] / alone
        print(
            f"{r['case']:>48} {r['online_p50_ms']:>7.1f} {r['online_p99_ms']:>7.1f} "
            f"{r['online_max_ms']:>7.1f} {r['p99_vs_alone']:>8.2f}x {r['offline_calls']:>8}"
        )
    write_csv(args.out / "compiled_threads.csv", rows)
    if args.json:
        meta = {"date": time.strftime("%Y-%m-%d"), "quick": args.quick, "seconds": seconds}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
