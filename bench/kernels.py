"""Benchmark the OR kernels: insertion evaluations per second, ``schedule``, full-round latency.

One evaluation = one (rider, order, pickup position, drop-off position) placement priced.
CPU methods measured in the same run: the compiled twin of the CUDA kernel (``jit``, the CPU
default) and the NumPy array loop (``loop``); baselines: the plain-Python reference (on a random
sample of pairs, since it prices ~10^4 placements a second; its rate is per placement, so
sampling is fair), and both CPU methods for CuPy when a GPU is present. ``schedule`` (route
simulation, six calls in a served round's solve) the same way: its compiled loop against the
array loop, on rounds as the generator makes them.

    python bench/kernels.py [--quick] [--json PATH] [--out DIR]

Writes DIR/kernels.csv and DIR/kernels.png (default bench/out/), prints a table.
"""

from __future__ import annotations

import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from kernels._reference import reference_insertion_costs
from kernels.backend import cupy_available
from kernels.insertion_costs import insertion_costs
from kernels.schedule import schedule
from planner import dispatch_round, generate_round, pack_round

LATE_WEIGHT = 4.0


def placements(routes) -> int:
    """Placements per order: sum over routes of (limit+1)(limit+2)/2."""
    lim = routes.insert_limit.astype(np.int64)
    return int(((lim + 1) * (lim + 2) // 2).sum())


def time_it(fn, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_size(n_riders: int, n_orders: int, repeats: int, ref_pairs: int, log) -> dict:
    packed = pack_round(generate_round(n_riders, n_orders, seed=7, route_stops=(4, 12)))
    evals = placements(packed.routes) * n_orders
    row: dict = {"size": f"{n_riders}x{n_orders}", "evaluations": evals}

    for method in ("jit", "loop"):
        insertion_costs(packed.routes, packed.orders, late_weight=LATE_WEIGHT, method=method)

        def price(method: str = method) -> None:
            insertion_costs(packed.routes, packed.orders, late_weight=LATE_WEIGHT, method=method)

        t = statistics.median(time_it(price, repeats))
        row[f"{method}_s"] = t
        row[f"{method}_evals_per_s"] = evals / t
        log(f"  {method} {row['size']}: {t * 1000:.1f} ms median of {repeats}")
    row["jit_vs_loop"] = row["loop_s"] / row["jit_s"]

    rng = np.random.default_rng(0)
    k = min(ref_pairs, n_riders * n_orders)
    flat = rng.choice(n_riders * n_orders, k, replace=False)
    ri, oi = flat // n_orders, flat % n_orders
    sub_r, sub_o = packed.routes.take(ri), packed.orders.take(oi)
    t0 = time.perf_counter()
    reference_insertion_costs(sub_r, sub_o, late_weight=LATE_WEIGHT, pairs=True)
    t_ref = time.perf_counter() - t0
    row["reference_evals_per_s"] = placements(sub_r) / t_ref
    row["jit_vs_reference"] = row["jit_evals_per_s"] / row["reference_evals_per_s"]
    log(f"  reference {row['size']}: {k} sampled pairs in {t_ref:.2f} s")

    if cupy_available():
        import cupy

        r_gpu, o_gpu = packed.routes.to(cupy), packed.orders.to(cupy)

        def on_gpu() -> None:
            insertion_costs(r_gpu, o_gpu, late_weight=LATE_WEIGHT)
            cupy.cuda.Device().synchronize()

        on_gpu()
        t_gpu = statistics.median(time_it(on_gpu, max(repeats, 5)))
        row["cupy_s"] = t_gpu
        row["cupy_evals_per_s"] = evals / t_gpu
        row["cupy_vs_jit"] = row["jit_s"] / t_gpu
        row["cupy_vs_loop"] = row["loop_s"] / t_gpu
        log(f"  cupy {row['size']}: {t_gpu * 1000:.2f} ms")
    return row


def bench_schedule(n_riders: int, n_orders: int, repeats: int, log) -> dict:
    """``schedule`` of a generated round's routes: the compiled loop against the array loop."""
    routes = pack_round(generate_round(n_riders, n_orders, seed=11)).routes
    row: dict = {"size": f"{n_riders}x{n_orders}", "stops": int(routes.n_stops.sum())}
    calls = max(5, 20_000 // max(n_riders, 1))  # a call is ~0.1-5 ms: time a batch of them
    for method in ("jit", "loop"):
        schedule(routes, method=method)
        t = statistics.median(
            time_it(lambda m=method: [schedule(routes, method=m) for _ in range(calls)], repeats)
        )
        row[f"{method}_ms"] = t / calls * 1e3
    row["jit_vs_loop"] = row["loop_ms"] / row["jit_ms"]
    log(f"  schedule {row['size']}: jit {row['jit_ms']:.3f} ms, loop {row['loop_ms']:.3f} ms")
    return row


def bench_round(n_riders: int, n_orders: int, repeats: int, log) -> list[dict]:
    round_ = generate_round(n_riders, n_orders, seed=11, route_stops=(0, 12))
    rows = []
    for improve in (False, True):
        dispatch_round(round_, backend="numpy", improve_routes=improve)
        plans = []
        walls = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            plans.append(dispatch_round(round_, backend="numpy", improve_routes=improve))
            walls.append(time.perf_counter() - t0)
        stages = {
            key: statistics.median(p.timings_ms.get(key, 0.0) for p in plans)
            for key in plans[0].timings_ms
        }
        row = {
            "round": f"{n_riders}x{n_orders}",
            "improve": improve,
            "median_ms": statistics.median(walls) * 1000,
            "assigned": len(plans[0].assignments),
            **{k: round(v, 1) for k, v in stages.items()},
        }
        log(f"  dispatch_round improve={improve}: {row['median_ms']:.0f} ms median of {repeats}")
        rows.append(row)
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    sizes = [r["size"] for r in rows]
    x = np.arange(len(sizes))
    series = [
        ("reference_evals_per_s", "Python reference"),
        ("loop_evals_per_s", "NumPy array loop"),
        ("jit_evals_per_s", "compiled CPU twin"),
    ]
    if "cupy_evals_per_s" in rows[0]:
        series.append(("cupy_evals_per_s", "CuPy (CUDA kernel)"))
    width = 0.8 / len(series)
    for k, (key, label) in enumerate(series):
        ax.bar(x + k * width, [r[key] for r in rows], width, label=label)
    ax.set_yscale("log")
    ax.set_xticks(x + width * (len(series) - 1) / 2, sizes)
    ax.set_xlabel("riders x orders (routes of 4-12 stops)")
    ax.set_ylabel("insertion evaluations / s")
    ax.set_title("insertion_costs throughput")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    args = parser(__doc__, "small sizes, under a minute").parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    sizes = [(100, 50), (1000, 300)] if args.quick else [(100, 50), (1000, 300), (5000, 1000)]
    repeats = 3 if args.quick else 7
    log(f"insertion_costs, {len(sizes)} sizes:")
    rows = [bench_size(r, o, repeats, 200 if args.quick else 400, log) for r, o in sizes]
    log("schedule:")
    schedule_rows = [
        bench_schedule(r, o, repeats, log)
        for r, o in (
            [(100, 20), (1000, 300)] if args.quick else [(100, 20), (1000, 300), (5000, 2000)]
        )
    ]
    log("dispatch_round 1000x300:")
    round_rows = bench_round(1000, 300, 5 if args.quick else 11, log)

    print("\ninsertion_costs (median; reference rate sampled on random pairs)")
    head = (
        f"{'size':>10} {'evaluations':>12} {'jit ms':>8} {'loop ms':>8} {'jit/loop':>8} "
        f"{'jit ev/s':>9} {'ref ev/s':>9} {'jit/ref':>8}"
    )
    if "cupy_s" in rows[0]:
        head += f" {'cupy ms':>8} {'cupy/jit':>8} {'cupy/loop':>9}"
    print(head)
    for r in rows:
        line = (
            f"{r['size']:>10} {r['evaluations']:>12,} {r['jit_s'] * 1000:>8.1f} "
            f"{r['loop_s'] * 1000:>8.1f} {r['jit_vs_loop']:>7.1f}x {r['jit_evals_per_s']:>9.3g} "
            f"{r['reference_evals_per_s']:>9.3g} {r['jit_vs_reference']:>7.0f}x"
        )
        if "cupy_s" in r:
            line += (
                f" {r['cupy_s'] * 1000:>8.2f} {r['cupy_vs_jit']:>7.1f}x {r['cupy_vs_loop']:>8.1f}x"
            )
        print(line)
    print("\nschedule (median ms per call)")
    print(f"{'size':>10} {'stops':>7} {'jit ms':>8} {'loop ms':>8} {'jit/loop':>8}")
    for r in schedule_rows:
        print(
            f"{r['size']:>10} {r['stops']:>7} {r['jit_ms']:>8.3f} {r['loop_ms']:>8.3f} "
            f"{r['jit_vs_loop']:>7.1f}x"
        )
    print("\ndispatch_round, CPU (NumPy backend), all pairs (median ms per stage)")
    keys = [k for k in round_rows[0] if k.endswith("_ms")]
    print(f"{'round':>9} {'improve':>7} " + " ".join(f"{k:>12}" for k in keys))
    for r in round_rows:
        vals = " ".join(f"{r[k]:>12.1f}" for k in keys)
        print(f"{r['round']:>9} {r['improve']!s:>7} {vals}")

    write_csv(args.out / "kernels.csv", rows)
    plot(rows, args.out / "kernels.png")
    meta = {
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "quick": args.quick,
    }
    if args.json:
        args.json.write_text(
            json.dumps(
                {"meta": meta, "insertion": rows, "schedule": schedule_rows, "round": round_rows},
                indent=2,
            )
        )
    log(f"wrote {args.out / 'kernels.csv'} and {args.out / 'kernels.png'}")


if __name__ == "__main__":
    main()
