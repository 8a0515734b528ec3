"""Where a CuPy pricing and a CuPy round spend their time: host (CPU) against device (GPU)
time per call (``cupyx.profiler.benchmark``), then the Python functions behind the host time
(cProfile). A call whose CPU time is as long as its GPU time is bound by its launches.

    python bench/gpu_profile.py [--quick] [--json PATH] [--out DIR]

Needs CuPy and a CUDA GPU (exits 2 otherwise). Writes DIR/gpu_profile.txt (the cProfile tables).
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser

from domain import DispatchWeights
from kernels.backend import cupy_available
from kernels.insertion_costs import insertion_costs
from planner import generate_round, pack_round
from planner.dispatch_round import round_arrays, solve_round


def measure(name: str, call, repeats: int, profile_calls: int) -> tuple[dict, str]:
    import cupy
    from cupyx.profiler import benchmark

    got = benchmark(call, n_repeat=repeats, n_warmup=3)
    row = {
        "call": name,
        "cpu_ms": float(got.cpu_times.mean() * 1e3),
        "gpu_ms": float(got.gpu_times[0].mean() * 1e3),
    }
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(profile_calls):
        call()
        cupy.cuda.get_current_stream().synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(25)
    return row, f"== {name}: {profile_calls} calls\n{text.getvalue()}"


def main() -> None:
    args = parser(__doc__, "fewer repeats").parse_args()
    if not cupy_available():
        log("needs CuPy and a CUDA GPU; none is usable here")
        sys.exit(2)
    import cupy

    args.out.mkdir(parents=True, exist_ok=True)
    repeats = 10 if args.quick else 50
    packed = pack_round(generate_round(100, 50, seed=7, route_stops=(4, 12)))
    routes, orders = packed.routes.to(cupy), packed.orders.to(cupy)
    weights = DispatchWeights()

    def on_device(n_riders: int, n_orders: int):
        return round_arrays(generate_round(n_riders, n_orders, seed=1))[1].to(cupy)

    small, mid, big = on_device(300, 100), on_device(1000, 300), on_device(5000, 2000)
    # (name, call, timed calls, profiled calls): the big round is seconds a call on a slow path
    calls = [
        ("insertion_costs 100x50", lambda: insertion_costs(routes, orders, late_weight=4.0), 0, 20),
        ("solve_round 300x100", lambda: solve_round(small, weights), 0, 5),
        ("solve_round 1000x300", lambda: solve_round(mid, weights), 0, 3),
        ("solve_round 5000x2000", lambda: solve_round(big, weights), 3, 1),
    ]
    rows, texts = [], []
    for name, call, timed, profiled in calls:
        row, text = measure(name, call, timed or repeats, profiled)
        log(f"  {name}: CPU {row['cpu_ms']:.3f} ms, GPU {row['gpu_ms']:.3f} ms per call")
        rows.append(row)
        texts.append(text)
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"\n{device}: time per call (cupyx.profiler.benchmark, mean of {repeats})")
    print(f"{'call':>24} {'CPU ms':>8} {'GPU ms':>8}")
    for r in rows:
        print(f"{r['call']:>24} {r['cpu_ms']:>8.3f} {r['gpu_ms']:>8.3f}")
    (args.out / "gpu_profile.txt").write_text("\n".join(texts))
    if args.json:
        meta = {"device": device, "date": time.strftime("%Y-%m-%d"), "quick": args.quick}
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
