"""Benchmark the exact assignment: our two builds against SciPy, per round and at process start.

Per round: the median time of ``assign`` on a real round's first-pass cost matrix (insertion
costs, +inf where infeasible), for the compiled build (``jit``, the default), the NumPy build
(``loop``, used while the compiled one loads) and the baseline, SciPy's
``linear_sum_assignment`` on the same matrix priced the same way.

At process start: what a fresh replica pays before its first assignment can run (a new Python
process: import + first call on a tiny matrix), median over fresh processes, for the NumPy
build (what a replica's constructor runs), the compiled build (what it loads in the
background) and SciPy (what the constructor ran before).

    python bench/assign.py [--quick] [--json PATH] [--out DIR]

Writes DIR/assign.csv and DIR/assign.png (default bench/out/), prints two tables.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from kernels.assign import assign
from kernels.insertion_costs import insertion_costs
from planner import generate_round, pack_round

ROOT = Path(__file__).resolve().parents[1]

# What each fresh process runs; numpy is imported before the clock starts (a replica has it).
START_SNIPPETS = {
    "loop": "from kernels.assign import assign; assign(c, method='loop')",
    "jit": "from kernels.assign import assign; assign(c, method='jit')",
    "scipy": "from scipy.optimize import linear_sum_assignment; linear_sum_assignment(c)",
}
START_PROGRAM = """
import time, numpy as np
c = np.arange(12, dtype=np.float32).reshape(4, 3)
t0 = time.perf_counter()
{snippet}
print(time.perf_counter() - t0)
"""


def scipy_assign(cost: np.ndarray) -> np.ndarray:
    """The baseline with ``assign``'s contract: infeasible pairs priced as ``assign`` does."""
    from scipy.optimize import linear_sum_assignment

    from kernels.assign import _unassigned_price

    finite = np.isfinite(cost)
    rows, cols = linear_sum_assignment(
        np.where(finite, cost.astype(np.float64), _unassigned_price(cost))
    )
    rider_of = np.full(cost.shape[1], -1, np.int32)
    keep = finite[rows, cols]
    rider_of[cols[keep]] = rows[keep]
    return rider_of


def total(cost: np.ndarray, rider_of: np.ndarray) -> tuple[int, float]:
    got = np.nonzero(rider_of >= 0)[0]
    return len(got), float(cost[rider_of[got], got].astype(np.float64).sum())


def median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_round(n_riders: int, n_orders: int, repeats: int) -> dict:
    packed = pack_round(generate_round(n_riders, n_orders, seed=7))
    cost = insertion_costs(packed.routes, packed.orders, late_weight=4.0).cost
    want = total(cost, scipy_assign(cost))
    row: dict = {
        "size": f"{n_riders}x{n_orders}",
        "finite": round(float(np.isfinite(cost).mean()), 3),
    }
    for name, fn in (
        ("scipy", lambda: scipy_assign(cost)),
        ("jit", lambda: assign(cost, method="jit")),
        ("loop", lambda: assign(cost, method="loop")),
    ):
        got = total(cost, fn())
        if got[0] != want[0] or not np.isclose(got[1], want[1], rtol=1e-9):
            raise SystemExit(f"{name} disagrees with SciPy at {row['size']}: {got} vs {want}")
        row[f"{name}_ms"] = median_s(fn, repeats) * 1000
    row["jit_vs_scipy"] = row["scipy_ms"] / row["jit_ms"]
    row["loop_vs_scipy"] = row["scipy_ms"] / row["loop_ms"]
    log(f"  {row['size']}: scipy {row['scipy_ms']:.2f} ms, jit {row['jit_ms']:.2f} ms")
    return row


def bench_start(processes: int) -> dict:
    """Median seconds from a fresh interpreter to its first answer, per build."""
    # Fill Numba's on-disk cache first, as a replica's background loader does.
    program = START_PROGRAM.format(snippet=START_SNIPPETS["jit"])
    subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, check=True)
    out = {}
    for name, snippet in START_SNIPPETS.items():
        runs = []
        for _ in range(processes):
            program = START_PROGRAM.format(snippet=snippet)
            done = subprocess.run(
                [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True
            )
            if done.returncode:
                raise SystemExit(f"start-up probe {name} failed:\n{done.stderr}")
            runs.append(float(done.stdout.strip().splitlines()[-1]))
        out[name] = statistics.median(runs)
        log(f"  start {name}: {out[name] * 1000:.0f} ms median of {processes} processes")
    return out


def plot(rows: list[dict], start: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(rows))
    series = [("scipy_ms", "SciPy (baseline)"), ("jit_ms", "compiled"), ("loop_ms", "NumPy")]
    width = 0.8 / len(series)
    for k, (key, label) in enumerate(series):
        ax.bar(x + k * width, [r[key] for r in rows], width, label=label)
    ax.set_yscale("log")
    ax.set_xticks(x + width, [r["size"] for r in rows])
    ax.set_xlabel("riders x orders (a real round's first pass)")
    ax.set_ylabel("ms per assignment (median)")
    ax.set_title("exact assignment per round")
    ax.legend()
    labels = {"loop": "NumPy", "jit": "compiled", "scipy": "SciPy"}
    ax2.bar(
        [labels[n] for n in start], [s * 1000 for s in start.values()], color=["C2", "C1", "C0"]
    )
    ax2.set_ylabel("ms, fresh process to first answer")
    ax2.set_title("start-up cost")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    args = parser(__doc__, "two sizes and 3 processes, under a minute").parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sizes = (
        [(30, 10), (1000, 300)] if args.quick else [(30, 10), (200, 60), (1000, 300), (5000, 1000)]
    )
    repeats = 5 if args.quick else 15
    assign(np.zeros((2, 2), np.float32), method="jit")  # compile outside the clock
    log(f"per round, {len(sizes)} sizes, median of {repeats}:")
    rows = [bench_round(r, o, repeats) for r, o in sizes]
    log("start-up:")
    start = bench_start(3 if args.quick else 9)

    print("\nexact assignment per round (median ms; ratios = SciPy time / ours, > 1 is faster)")
    print(
        f"{'size':>10} {'finite':>7} {'scipy':>8} {'jit':>8} {'loop':>8} "
        f"{'jit/scipy':>10} {'loop/scipy':>10}"
    )
    for r in rows:
        print(
            f"{r['size']:>10} {r['finite']:>7.2f} {r['scipy_ms']:>8.2f} {r['jit_ms']:>8.2f} "
            f"{r['loop_ms']:>8.2f} {r['jit_vs_scipy']:>9.2f}x {r['loop_vs_scipy']:>9.2f}x"
        )
    print("\nfresh process to first assignment (median ms; import included)")
    print(f"{'build':>8} {'ms':>8} {'vs scipy':>9}")
    for name, s in start.items():
        print(f"{name:>8} {s * 1000:>8.0f} {start['scipy'] / s:>8.2f}x")

    write_csv(args.out / "assign.csv", rows)
    plot(rows, start, args.out / "assign.png")
    if args.json:
        meta = {
            "machine": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d"),
            "quick": args.quick,
        }
        args.json.write_text(json.dumps({"meta": meta, "rounds": rows, "start_s": start}, indent=2))


if __name__ == "__main__":
    main()
