"""Benchmark CUDA stream priorities: online rounds beside a flood of offline rounds on one GPU.

Two threads of one process share the device, as online and offline rounds share a solver
replica. The online thread issues a small round every ``--period-ms`` and times each call
(launch to result); the offline thread solves big rounds back to back. Each level runs in
these modes, one after the other:

* ``online alone``, ``offline alone``: the baselines (latency; offline calls per second).
* ``same priority``: both threads on non-blocking streams of equal (the default) priority.
* ``priorities``: online on the device's greatest priority, offline on its least
  (``kernels.streams``, what ``actors.or_solver`` does).

Levels: ``kernel`` (the insertion pricing alone, device arrays in, device arrays out: the
device's scheduling with little host work), ``round`` (``solve_round``: price, assign,
insert, improve, host arrays out: what a replica runs, host work and the GIL included, both
rounds on the GPU) and ``round-auto`` (the same rounds, each where ``backend: auto`` solves
it: the online 300 x 100 on the host's NumPy, the offline 5000 x 2000 on the GPU).

    python bench/stream_priority.py [--quick] [--json PATH] [--out DIR]

Needs CuPy and a CUDA GPU (exits 2 otherwise). Writes DIR/stream_priority.csv and .png.
"""

from __future__ import annotations

import json
import platform
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from config import get_settings
from domain import DispatchWeights
from kernels.backend import backend_for_round, cupy_available, module_for
from kernels.insertion_costs import insertion_costs
from kernels.streams import new_stream, priority_range, stream_priority
from planner import generate_round
from planner.dispatch_round import round_arrays, solve_round

MODES = ("online alone", "offline alone", "same priority", "priorities")


def workloads(level: str, online_size: tuple[int, int], offline_size: tuple[int, int]):
    """(online call, offline call): each runs on the current stream and returns when its
    result is ready."""
    import cupy

    weights = DispatchWeights()

    def device_round(size: tuple[int, int], seed: int):
        _, arrays = round_arrays(generate_round(*size, seed=seed))
        if level == "round-auto":  # where backend "auto" solves it: small rounds on the host
            chosen = backend_for_round("auto", *size, get_settings().gpu_min_pairs)
            return arrays.to(module_for(chosen))
        return arrays.to(cupy)

    on, off = device_round(online_size, 1), device_round(offline_size, 2)
    if level == "kernel":

        def call(a) -> Callable[[], None]:
            def run() -> None:
                out = insertion_costs(a.routes, a.orders, late_weight=weights.late_weight)
                cupy.cuda.get_current_stream().synchronize()
                del out

            return run

    else:

        def call(a) -> Callable[[], None]:
            return lambda: solve_round(a, weights)  # host arrays out: it synchronises

    return call(on), call(off)


def run_mode(
    mode: str,
    online: Callable[[], None],
    offline: Callable[[], None],
    seconds: float,
    period_s: float,
) -> dict:
    least, greatest = priority_range()
    on_prio = greatest if mode == "priorities" else least
    on_stream, off_stream = new_stream(on_prio), new_stream(least)
    stop = threading.Event()
    offline_calls: list[float] = []

    def flood() -> None:
        with off_stream:
            while not stop.is_set():
                t0 = time.perf_counter()
                offline()
                offline_calls.append(time.perf_counter() - t0)

    flooder = None
    if mode != "online alone":
        flooder = threading.Thread(target=flood, daemon=True)
        flooder.start()
    latencies = []
    start = time.perf_counter()
    if mode == "offline alone":
        time.sleep(seconds)
    else:
        with on_stream:
            while time.perf_counter() - start < seconds:
                t0 = time.perf_counter()
                online()
                latencies.append((time.perf_counter() - t0) * 1e3)
                time.sleep(max(0.0, period_s - (time.perf_counter() - t0)))
    elapsed = time.perf_counter() - start
    stop.set()
    if flooder is not None:
        flooder.join()
    row = {
        "mode": mode,
        "online_priority": stream_priority(on_stream),
        "offline_priority": stream_priority(off_stream),
        "online_calls": len(latencies),
        "offline_calls": len(offline_calls),
    }
    if latencies:
        row["online_p50_ms"] = float(np.percentile(latencies, 50))
        row["online_p99_ms"] = float(np.percentile(latencies, 99))
    if offline_calls:
        row["offline_per_s"] = len(offline_calls) / elapsed
        row["offline_call_ms"] = float(np.median(offline_calls) * 1e3)
    return row


def bench_level(level: str, args, log) -> list[dict]:
    online_size = (300, 100)
    offline_size = (2000, 1000) if args.quick else (5000, 2000)
    online, offline = workloads(level, online_size, offline_size)
    for _ in range(3):  # compile the kernels, fill the memory pool
        online()
        offline()
    seconds = 3.0 if args.quick else 8.0
    rows = []
    for mode in MODES:
        row = run_mode(mode, online, offline, seconds, args.period_ms / 1e3)
        row.update(
            level=level,
            online_round=f"{online_size[0]}x{online_size[1]}",
            offline_round=f"{offline_size[0]}x{offline_size[1]}",
        )
        log(f"  {level} {mode}: {row}")
        rows.append(row)
    alone = rows[0]["online_p99_ms"]
    offline_alone = rows[1]["offline_per_s"]
    for row in rows:
        if "online_p99_ms" in row:
            row["p99_vs_alone"] = row["online_p99_ms"] / alone
        if "offline_per_s" in row:
            row["offline_share"] = row["offline_per_s"] / offline_alone
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = list(dict.fromkeys(r["level"] for r in rows))
    fig, axes = plt.subplots(1, len(levels), figsize=(5 * len(levels), 3.6), squeeze=False)
    for ax, level in zip(axes[0], levels, strict=True):
        mine = [r for r in rows if r["level"] == level and "online_p99_ms" in r]
        x = np.arange(len(mine))
        ax.bar(x - 0.2, [r["online_p50_ms"] for r in mine], 0.4, label="p50")
        ax.bar(x + 0.2, [r["online_p99_ms"] for r in mine], 0.4, label="p99")
        ax.set_xticks(x, [r["mode"] for r in mine])
        ax.set_ylabel("online call, ms")
        ax.set_title(f"{level}: online {mine[0]['online_round']} beside {mine[0]['offline_round']}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = parser(__doc__, "smaller offline rounds, 3 s per mode")
    ap.add_argument("--period-ms", type=float, default=20.0, help="online calls' spacing")
    ap.add_argument(
        "--levels",
        default="kernel,round,round-auto",
        help="comma-separated: kernel, round (both rounds on the GPU), round-auto (each round "
        "where backend auto puts it: the online one on the host under ORML_GPU_MIN_PAIRS)",
    )
    args = ap.parse_args()
    if not cupy_available():
        log("needs CuPy and a CUDA GPU; none is usable here")
        sys.exit(2)
    import cupy

    args.out.mkdir(parents=True, exist_ok=True)
    least, greatest = priority_range()
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    log(f"{device}: stream priorities {least} (least) to {greatest} (greatest)")
    rows = [r for level in args.levels.split(",") for r in bench_level(level, args, log)]

    print(f"\n{device}, stream priorities {least}..{greatest}; online every {args.period_ms} ms")
    print(
        f"{'level':>6} {'mode':>14} {'online p50':>10} {'p99':>8} {'p99/alone':>9} "
        f"{'offline/s':>9} {'offline share':>13}"
    )
    for r in rows:
        p50 = f"{r['online_p50_ms']:.2f}" if "online_p50_ms" in r else "-"
        p99 = f"{r['online_p99_ms']:.2f}" if "online_p99_ms" in r else "-"
        ratio = f"{r['p99_vs_alone']:.2f}x" if "p99_vs_alone" in r else "-"
        rate = f"{r['offline_per_s']:.2f}" if "offline_per_s" in r else "-"
        share = f"{r['offline_share']:.2f}" if "offline_share" in r else "-"
        print(
            f"{r['level']:>6} {r['mode']:>14} {p50:>10} {p99:>8} {ratio:>9} {rate:>9} {share:>13}"
        )
    write_csv(args.out / "stream_priority.csv", rows)
    plot(rows, args.out / "stream_priority.png")
    meta = {
        "device": device,
        "priority_range": [least, greatest],
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d"),
        "quick": args.quick,
        "period_ms": args.period_ms,
    }
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    log(f"wrote {args.out / 'stream_priority.csv'} and {args.out / 'stream_priority.png'}")


if __name__ == "__main__":
    main()
