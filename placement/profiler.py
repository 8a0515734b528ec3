"""Measure a servable model's profile on this machine's device and write it as JSON.

    python -m placement.profiler or_solver [--backend auto] [--riders 300 --orders 100]
    python bench/etr.py --profiles profiles          (the ETR runtimes)

The OR solver's unit of work is one dispatch round of the given size (it is not batched):
latency is one ``solve_round`` (price, assign, insert, improve), p50/p99 over repeats.
Memory: on a GPU the CUDA context (pynvml's per-process usage before any array, minus
nothing), the kernels' workspace (CuPy pool high-water mark after a round); on the CPU the
process RSS before and after, so the whole pipeline runs here.
Writes profiles/or_solver/<device>-<backend>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def profile_or_solver(
    backend: str, riders: int, orders: int, repeats: int, sizes: list[tuple[int, int]] = ()
) -> dict:
    """The profile at ``riders`` x ``orders`` (its one batch point: a round is not batched),
    and ``round_sizes``: that round and each of ``sizes``, the cost of the round by size."""
    from config import backend_for
    from domain import DispatchWeights
    from kernels.backend import module_for, resolve_backend
    from planner import generate_round
    from planner.dispatch_round import round_arrays, solve_round

    backend = resolve_backend(backend_for(backend))
    xp = module_for(backend)
    before = _rss_mb()
    context_mb = 0.0
    if backend == "cupy":
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        xp.zeros(1).sum()  # creates the context
        procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        context_mb = sum(p.usedGpuMemory for p in procs if p.pid == os.getpid()) / 2**20
    weights = DispatchWeights()
    points = []
    for n_riders, n_orders in [(riders, orders), *sizes]:
        _, arrays = round_arrays(generate_round(n_riders, n_orders, seed=1))
        dev = arrays.to(xp)
        times = []
        runs = repeats if n_riders * n_orders <= 10**6 else max(3, repeats // 5)
        for k in range(runs + 2):
            t0 = time.perf_counter()
            solve_round(dev, weights)
            if k >= 2:  # two warm-ups (kernel compile on a GPU)
                times.append((time.perf_counter() - t0) * 1e3)
        points.append(
            {
                "round": f"{n_riders}x{n_orders}",
                "p50_ms": round(float(np.median(times)), 3),
                "p99_ms": round(float(np.percentile(times, 99)), 3),
            }
        )
    if backend == "cupy":
        workspace_mb = xp.get_default_memory_pool().total_bytes() / 2**20
        from devices.catalog import local_gpu_type

        device_type = local_gpu_type()
    else:
        workspace_mb = max(0.0, _rss_mb() - before)
        context_mb = before
        device_type = f"CPU-{os.cpu_count()}core"
    return {
        "model": "or_solver",
        "device_type": device_type,
        "runtime": backend,
        "measured": dt.date.today().isoformat(),
        "basis": f"one {riders}x{orders} round per call, solve_round (price, assign, improve)",
        "context_mb": round(context_mb, 1),
        "weights_mb": 0.0,
        "workspace_mb": round(workspace_mb, 1),
        "per_row_kb": 0.0,
        "host": platform.processor() or platform.machine(),
        "command": "python -m placement.profiler or_solver "
        + f"--backend {backend} --riders {riders} --orders {orders}"
        + (" --sizes " + ",".join(f"{r}x{o}" for r, o in sizes) if sizes else ""),
        "points": [{"batch": 1, "p50_ms": points[0]["p50_ms"], "p99_ms": points[0]["p99_ms"]}],
        "round_sizes": points,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="Measure a model's profile on this device.")
    ap.add_argument("model", choices=["or_solver"])
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--riders", type=int, default=300)
    ap.add_argument("--orders", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument(
        "--sizes",
        type=lambda text: [tuple(int(n) for n in size.split("x")) for size in text.split(",")],
        default=[],
        help="more round sizes, one point each, e.g. 1000x300,5000x2000",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "profiles")
    args = ap.parse_args()
    prof = profile_or_solver(args.backend, args.riders, args.orders, args.repeats, args.sizes)
    device = prof["device_type"].lower()
    if device.startswith("cpu-"):  # CPU-2core -> cpu, CPU-16core -> cpu16
        cores = device.removeprefix("cpu-").removesuffix("core")
        device = "cpu" if cores == "2" else f"cpu{cores}"
    path = args.out / "or_solver" / f"{device}-{prof['runtime']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(prof, indent=2) + "\n")
    print(f"{path}: p50 {prof['points'][0]['p50_ms']} ms, workspace {prof['workspace_mb']} MiB")


if __name__ == "__main__":
    main()
