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


def bench_round(
    n_riders: int, n_orders: int, repeats: int, log, backend: str = "numpy"
) -> list[dict]:
    """``dispatch_round`` end to end on one backend, without and with route improvement, the
    certified pass against the dense one (every pair priced, the dense assignment: the round
    as it was solved before, and the reference the certified pass is held to)."""
    round_ = generate_round(n_riders, n_orders, seed=11, route_stops=(0, 12))
    rows = []
    for improve in (False, True):
        for solver in ("certified", "dense"):
            dense = solver == "dense"
            dispatch_round(round_, backend=backend, improve_routes=improve, dense=dense)
            plans = []
            walls = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                plans.append(
                    dispatch_round(round_, backend=backend, improve_routes=improve, dense=dense)
                )
                walls.append(time.perf_counter() - t0)
            stages = {
                key: statistics.median(p.timings_ms.get(key, 0.0) for p in plans)
                for key in plans[0].timings_ms
            }
            row = {
                "round": f"{n_riders}x{n_orders}",
                "backend": backend,
                "solver": solver,
                "improve": improve,
                "median_ms": statistics.median(walls) * 1000,
                "assigned": len(plans[0].assignments),
                "assignment_cost": sum(a.cost for a in plans[0].assignments),
                "plan_cost": plans[0].cost.total,
                **{k: round(v, 1) for k, v in stages.items()},
            }
            log(
                f"  dispatch_round {row['round']} {backend} {solver} improve={improve}: "
                f"{row['median_ms']:.1f} ms median of {repeats}"
            )
            rows.append(row)
    return rows


def bench_improve(n_riders: int, repeats: int, log) -> list[dict]:
    """``improve`` over every route of a generated fleet (2-12 stops each): the array loop (the
    reference, a pass as some forty array calls) against the one-call search (compiled on the
    CPU, one CUDA launch on a GPU), same routes, same device."""
    from kernels.improve import improve

    packed = pack_round(generate_round(n_riders, 0, seed=5, route_stops=(2, 12)))
    devices = [("numpy", packed.routes, packed.owner, "jit")]
    if cupy_available():
        import cupy

        devices.append(("cupy", packed.routes.to(cupy), cupy.asarray(packed.owner), "cuda"))
    rows = []
    for backend, routes, owner, fast in devices:
        row: dict = {"routes": n_riders, "backend": backend}
        for method in ("loop", fast):

            def run(method=method, routes=routes, owner=owner, backend=backend) -> int:
                moves = improve(routes, owner, late_weight=LATE_WEIGHT, method=method)[2]
                if backend == "cupy":
                    import cupy

                    cupy.cuda.get_current_stream().synchronize()
                return int(moves)  # on CuPy a device scalar

            row["moves"] = run()
            row[f"{'loop' if method == 'loop' else 'one_call'}_ms"] = (
                statistics.median(time_it(run, repeats)) * 1e3
            )
        row["speedup"] = row["loop_ms"] / row["one_call_ms"]
        log(
            f"  improve {n_riders} routes {backend}: loop {row['loop_ms']:.1f} ms, "
            f"one call {row['one_call_ms']:.1f} ms"
        )
        rows.append(row)
    return rows


def certified_vs_dense(round_rows: list[dict]) -> list[dict]:
    """Per round, backend and improve setting: the certified pass against the dense one."""
    by_key = {(r["round"], r["backend"], r["improve"], r["solver"]): r for r in round_rows}
    out = []
    for (size, backend, improve, solver), new in by_key.items():
        old = by_key.get((size, backend, improve, "dense"))
        if solver != "certified" or old is None:
            continue
        out.append(
            {
                "round": size,
                "backend": backend,
                "improve": improve,
                "dense_ms": old["median_ms"],
                "certified_ms": new["median_ms"],
                "speedup": old["median_ms"] / new["median_ms"],
                "assigned": f"{new['assigned']}/{old['assigned']}",
                "plan_cost_ratio": new["plan_cost"] / old["plan_cost"] if old["plan_cost"] else 1.0,
                "assignment_cost_ratio": (
                    new["assignment_cost"] / old["assignment_cost"]
                    if old["assignment_cost"]
                    else 1.0
                ),
            }
        )
    return out


def round_crossover(round_rows: list[dict]) -> list[dict]:
    """Per round size and improve setting: NumPy against CuPy end to end (where both ran),
    each with the certified pass."""
    by_key = {
        (r["round"], r["improve"], r["backend"]): r["median_ms"]
        for r in round_rows
        if r["solver"] == "certified"
    }
    out = []
    for size, improve, backend in by_key:
        if backend == "numpy" and (size, improve, "cupy") in by_key:
            cpu, gpu = by_key[(size, improve, "numpy")], by_key[(size, improve, "cupy")]
            out.append(
                {
                    "round": size,
                    "improve": improve,
                    "numpy_ms": cpu,
                    "cupy_ms": gpu,
                    "cupy_speedup": cpu / gpu,
                }
            )
    return out


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


def plot_round_crossover(crossover: list[dict], path: Path) -> None:
    """CuPy's end-to-end speed-up over NumPy per round size (pairs), with and without improve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for improve, marker in ((False, "o"), (True, "s")):
        mine = sorted(
            (int(np.prod([int(n) for n in r["round"].split("x")])), r["cupy_speedup"])
            for r in crossover
            if r["improve"] is improve
        )
        ax.plot(*zip(*mine, strict=True), marker=marker, ls="", label=f"improve={improve}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("riders x orders (pairs)")
    ax.set_ylabel("NumPy ms / CuPy ms (end to end)")
    ax.set_title("dispatch_round: where the GPU pays")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_certified(versus: list[dict], path: Path) -> None:
    """Milliseconds per round size: the dense pass against the certified one (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in versus if r["improve"]]
    if not rows:
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["dense_ms"] for r in rows], 0.4, label="dense (every pair priced)")
    ax.bar(x + 0.2, [r["certified_ms"] for r in rows], 0.4, label="certified (same plans)")
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{r['round']} {r['backend']}" for r in rows])
    ax.set_ylabel("dispatch_round ms (median, with improvement)")
    ax.set_title(f"a whole round on {platform.machine()}: dense against certified")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def print_insertion(rows: list[dict]) -> None:
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


def print_schedule(schedule_rows: list[dict]) -> None:
    print("\nschedule (median ms per call)")
    print(f"{'size':>10} {'stops':>7} {'jit ms':>8} {'loop ms':>8} {'jit/loop':>8}")
    for r in schedule_rows:
        print(
            f"{r['size']:>10} {r['stops']:>7} {r['jit_ms']:>8.3f} {r['loop_ms']:>8.3f} "
            f"{r['jit_vs_loop']:>7.1f}x"
        )


def main() -> None:
    ap = parser(__doc__, "small sizes, under a minute")
    # (--round-sizes 5000x2000 times the dense pass too: about a minute per size on 2 cores)
    ap.add_argument(
        "--round-sizes",
        type=lambda text: [tuple(int(n) for n in size.split("x")) for size in text.split(",")],
        help="time only dispatch_round at these RIDERSxORDERS sizes, e.g. 500x200,700x250",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    rows: list[dict] = []
    schedule_rows: list[dict] = []
    if args.round_sizes is None:
        sizes = [(100, 50), (1000, 300)] if args.quick else [(100, 50), (1000, 300), (5000, 1000)]
        repeats = 3 if args.quick else 7
        log(f"insertion_costs, {len(sizes)} sizes:")
        rows = [bench_size(r, o, repeats, 200 if args.quick else 400, log) for r, o in sizes]
        log("schedule:")
        schedule_sizes = (
            [(100, 20), (1000, 300)] if args.quick else [(100, 20), (1000, 300), (5000, 2000)]
        )
        schedule_rows = [bench_schedule(r, o, repeats, log) for r, o in schedule_sizes]
    # Both backends end to end, so the table shows where a GPU starts to pay for a round.
    backends = ["numpy", "cupy"] if cupy_available() else ["numpy"]
    round_sizes = args.round_sizes or (
        [(300, 100), (1000, 300)]
        if args.quick
        else [(50, 20), (300, 100), (1000, 300), (5000, 2000)]
    )
    log(f"dispatch_round, {len(round_sizes)} sizes on {', '.join(backends)}:")
    round_rows = [
        row
        for r, o in round_sizes
        for backend in backends
        for row in bench_round(r, o, 3 if args.quick or r * o > 10**6 else 9, log, backend)
    ]
    crossover = round_crossover(round_rows)
    versus = certified_vs_dense(round_rows)
    log("improve, array loop against one call:")
    improve_rows = [
        row for r, _ in round_sizes for row in bench_improve(r, 3 if args.quick else 7, log)
    ]

    if rows:
        print_insertion(rows)
        print_schedule(schedule_rows)
    print("\ndispatch_round (median ms per stage)")
    keys = [k for k in round_rows[0] if k.endswith("_ms")]
    print(
        f"{'round':>9} {'backend':>7} {'solver':>9} {'improve':>7} "
        + " ".join(f"{k:>12}" for k in keys)
    )
    for r in round_rows:
        vals = " ".join(f"{r.get(k, 0.0):>12.1f}" for k in keys)
        print(f"{r['round']:>9} {r['backend']:>7} {r['solver']:>9} {r['improve']!s:>7} {vals}")
    print("\ndispatch_round: the certified pass against the dense one (same run, same rounds)")
    print(
        f"{'round':>9} {'backend':>7} {'improve':>7} {'dense ms':>9} {'cert. ms':>9} "
        f"{'speed-up':>8} {'assigned':>11} {'plan cost':>9} {'assign cost':>11}"
    )
    for r in versus:
        print(
            f"{r['round']:>9} {r['backend']:>7} {r['improve']!s:>7} {r['dense_ms']:>9.1f} "
            f"{r['certified_ms']:>9.1f} {r['speedup']:>7.2f}x {r['assigned']:>11} "
            f"{r['plan_cost_ratio']:>9.4f} {r['assignment_cost_ratio']:>11.4f}"
        )
    print("\nimprove over every route of a fleet: array loop against one call, median ms")
    head = ("routes", "backend", "loop ms", "one call ms", "speed-up", "moves")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (7, 7, 9, 11, 8, 6), strict=True)))
    for r in improve_rows:
        print(
            f"{r['routes']:>7} {r['backend']:>7} {r['loop_ms']:>9.1f} {r['one_call_ms']:>11.2f}"
            f" {r['speedup']:>7.1f}x {r['moves']:>6}"
        )
    if crossover:
        print("\ndispatch_round end to end: NumPy (CPU) against CuPy (GPU), median ms")
        print(f"{'round':>9} {'improve':>7} {'numpy ms':>9} {'cupy ms':>9} {'cupy speed-up':>13}")
        for r in crossover:
            print(
                f"{r['round']:>9} {r['improve']!s:>7} {r['numpy_ms']:>9.1f} {r['cupy_ms']:>9.1f}"
                f" {r['cupy_speedup']:>12.2f}x"
            )

    if rows:
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
                {
                    "meta": meta,
                    "insertion": rows,
                    "schedule": schedule_rows,
                    "round": round_rows,
                    "round_certified_vs_dense": versus,
                    "round_crossover": crossover,
                    "improve": improve_rows,
                },
                indent=2,
            )
        )
    if crossover:
        plot_round_crossover(crossover, args.out / "kernels_rounds.png")
    plot_certified(versus, args.out / "kernels_certified.png")
    if rows:
        log(f"wrote {args.out / 'kernels.csv'} and {args.out / 'kernels.png'}")


if __name__ == "__main__":
    main()
