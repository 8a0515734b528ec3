"""Benchmark the ETR runtimes: latency (p50, p99) and throughput per batch size.

    python bench/etr.py [--quick] [--json PATH] [--out DIR] [--profiles DIR]

Every runtime that can run here is measured in the same run (ONNX Runtime and the NumPy array
runtime on a CPU; CuPy and TensorRT too on a GPU), on rows drawn from the real test split.
Memory facts for placement: the model's weight bytes, and per batch size the process RSS (CPU)
or the device memory held by CuPy's pool (GPU) after the batch ran. Writes DIR/etr.csv and
DIR/etr.png, and with --profiles one JSON per runtime: PROFILES/etr/<device>-<runtime>.json.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from etr import load_artifact, load_runtime
from etr.dataset import load_deliveries, split
from etr.runtime_tensorrt import tensorrt_available
from kernels.backend import cupy_available

BATCHES = (1, 8, 64, 512, 4096)


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc), bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def device_bytes() -> int:
    import cupy

    return int(cupy.get_default_memory_pool().total_bytes())


def measure(runtime, rows: np.ndarray, batch: int, budget_s: float, min_reps: int) -> dict:
    reps_rows = np.resize(rows, (batch, rows.shape[1])).astype(np.float32)
    x = reps_rows
    sync = lambda: None  # noqa: E731
    if runtime.device == "cuda":
        import cupy

        x = cupy.asarray(reps_rows)
        sync = cupy.cuda.Device().synchronize
    for _ in range(3):
        runtime.predict(x)
    sync()
    times = []
    start = time.perf_counter()
    while len(times) < min_reps or time.perf_counter() - start < budget_s:
        t0 = time.perf_counter()
        runtime.predict(x)
        sync()
        times.append(time.perf_counter() - t0)
        if len(times) >= 20_000:
            break
    t = np.array(times)
    p50 = float(np.median(t))
    return {
        "batch": batch,
        "reps": len(times),
        "p50_ms": p50 * 1e3,
        "p99_ms": float(np.quantile(t, 0.99)) * 1e3,
        "rows_per_s": batch / p50,
        "memory_bytes": device_bytes() if runtime.device == "cuda" else rss_bytes(),
    }


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for name in dict.fromkeys(r["runtime"] for r in rows):
        mine = [r for r in rows if r["runtime"] == name]
        b = [r["batch"] for r in mine]
        a1.plot(b, [r["p50_ms"] for r in mine], "o-", label=f"{name} p50")
        a1.plot(b, [r["p99_ms"] for r in mine], "x--", alpha=0.6, label=f"{name} p99")
        a2.plot(b, [r["rows_per_s"] for r in mine], "o-", label=name)
    for ax, label in ((a1, "latency per call (ms)"), (a2, "throughput (rows/s)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("batch size")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("ETR runtimes")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = parser(__doc__, "shorter timing per point (< 1 min)")
    ap.add_argument("--profiles", type=Path, help="write <dir>/etr/<device>-<runtime>.json")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    artifact = load_artifact("etr")
    x, y = load_deliveries()
    rows = split(x, y).test.x
    names = ["onnxruntime", "numpy"]
    if cupy_available():
        names.append("cupy")
    if tensorrt_available():
        names.append("tensorrt")
    budget, min_reps = (0.3, 10) if args.quick else (1.5, 30)
    results, profiles = [], {}
    for name in names:
        before = rss_bytes()
        runtime = load_runtime(artifact, name)
        log(f"{name}: loaded (+{(rss_bytes() - before) / 2**20:.1f} MiB RSS)")
        points = []
        for batch in BATCHES:
            point = {"runtime": name, **measure(runtime, rows, batch, budget, min_reps)}
            log(
                f"  batch {batch:5d}: p50 {point['p50_ms']:.3f} ms, "
                f"{point['rows_per_s']:,.0f} rows/s"
            )
            points.append(point)
        results += points
        profiles[name] = {
            "model": "etr",
            "version": artifact.version,
            "runtime": name,
            "device": runtime.device,
            "device_name": platform.processor() or platform.machine(),
            "measured": time.strftime("%Y-%m-%d"),
            "weights_bytes": artifact.metadata["size_bytes"],
            "process_rss_before_load_bytes": before,
            "points": [
                {k: p[k] for k in ("batch", "p50_ms", "p99_ms", "rows_per_s", "memory_bytes")}
                for p in points
            ],
        }

    print(
        f"\nETR v{artifact.version} ({artifact.metadata['parameters']:,} parameters), "
        f"median of >= {min_reps} calls per point"
    )
    print(f"{'runtime':>12} {'batch':>6} {'p50 ms':>9} {'p99 ms':>9} {'rows/s':>12} {'mem MiB':>8}")
    for r in results:
        print(
            f"{r['runtime']:>12} {r['batch']:>6} {r['p50_ms']:>9.3f} {r['p99_ms']:>9.3f} "
            f"{r['rows_per_s']:>12,.0f} {r['memory_bytes'] / 2**20:>8.1f}"
        )
    write_csv(args.out / "etr.csv", results)
    plot(results, args.out / "etr.png")
    if args.profiles:
        for name, prof in profiles.items():
            path = args.profiles / "etr" / f"{prof['device']}-{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(prof, indent=2) + "\n")
            log(f"wrote {path}")
    if args.json:
        args.json.write_text(json.dumps({"results": results, "profiles": profiles}, indent=2))
    log(f"wrote {args.out / 'etr.csv'} and {args.out / 'etr.png'}")


if __name__ == "__main__":
    main()
