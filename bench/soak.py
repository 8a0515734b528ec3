"""Soak: a fixed request rate for N minutes; memory of every Serve process over time, errors.

    python bench/soak.py [--minutes 10] [--rate 20] [--heap] [--glibc-arenas] [--quick]
                         [--json PATH] [--out DIR]

Starts a local Ray and the app (CPU backends, ETR cache in L1) and offers open-loop HTTP load
(dispatch rounds and ETR calls over 256 distinct bodies, loopback only) for ``--minutes``.
Every 5 s it samples the resident set size of each Serve process (replicas, proxy,
controller). After a warm-up (the first fifth of the run, at least 30 s) it reports per process
the RSS at the end of warm-up, at the end, the growth between them and the fitted trend (MB
per minute). Target: no process grows more than 5% after warm-up; zero failed requests.
Writes DIR/soak.csv and DIR/soak.png (RSS over time). ``--heap`` traces the ingress's Python
heap from the end of warm-up (``serve_app.heap_probe``) and prints the allocation sites that
grew most, with the traced heap over time (DIR/soak-heap.csv): a leak grows there steadily,
allocator slack and native memory do not. Ray's processes get ``ops.local.PROCESS_ENV``
(two malloc arenas) as ``orml serve`` sets it; ``--glibc-arenas`` leaves glibc's default.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from common import log, parser, write_csv

from ops import drill, local
from serve_app.config import DispatchAppArgs

GROWTH_TARGET = 0.05
SAMPLE_EVERY_S = 5.0


def serve_processes() -> dict[int, str]:
    """pid -> role ("ServeReplica:orml:Etr", "ProxyActor", "ServeController") of Ray workers."""
    import psutil

    roles: dict[int, str] = {}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        title = " ".join(proc.info["cmdline"] or [])
        for prefix in ("ray::ServeReplica:", "ray::ProxyActor", "ray::ServeController"):
            if title.startswith(prefix):
                roles[proc.info["pid"]] = title.split()[0].removeprefix("ray::").split(".")[0]
    return roles


def rss_mb(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / 2**20
    except psutil.Error:
        return None


def plot(times: list[float], series: dict[str, list[float | None]], warm_s: float, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    minutes = np.array(times) / 60
    for name, values in series.items():
        ax.plot(minutes, [np.nan if v is None else v for v in values], label=name, lw=1)
    ax.axvline(warm_s / 60, ls="--", c="grey", lw=0.8)
    ax.set_xlabel("minutes (dashed: end of warm-up)")
    ax.set_ylabel("RSS MB")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def print_heap(report: dict, heap: list[dict]) -> None:
    """The ingress's traced Python heap: its trend, and the sites that grew most."""
    t = np.array([h["t_s"] for h in heap]) / 60
    mb = np.array([h["traced_mb"] for h in heap])
    slope = np.polyfit(t, mb, 1)[0] if len(t) >= 3 else float("nan")
    print(
        f"ingress Python heap (tracemalloc, from the end of warm-up): {mb[0]:.2f} -> "
        f"{mb[-1]:.2f} MB, trend {slope:.3f} MB/min, peak {report['peak_mb']} MB"
    )
    print("| allocation site | grew KB | blocks grew | size KB |")
    print("|---|---|---|---|")
    for r in report["top"]:
        where = r["where"].split("site-packages/")[-1]
        print(f"| {where} | {r['grew_kb']} | {r['count_grew']} | {r['size_kb']} |")


def main() -> None:
    ap = parser(__doc__, "2 minutes instead of --minutes")
    ap.add_argument("--minutes", type=float, default=10.0, help="how long the load runs")
    ap.add_argument("--rate", type=float, default=20.0, help="offered requests per second")
    ap.add_argument("--heap", action="store_true", help="trace the ingress's Python heap")
    ap.add_argument(
        "--glibc-arenas",
        action="store_true",
        help="leave MALLOC_ARENA_MAX unset (glibc's default) instead of ops.local's 2",
    )
    args = ap.parse_args()
    minutes = 2.0 if args.quick else args.minutes
    args.out.mkdir(parents=True, exist_ok=True)

    if args.glibc_arenas:
        local.PROCESS_ENV.pop("MALLOC_ARENA_MAX", None)
    from ray import serve

    url = local.start(num_cpus=4).http
    local.run_app(DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime"))
    roles = serve_processes()
    names = {pid: f"{role} ({pid})" for pid, role in roles.items()}
    log(f"soak: {minutes:g} min at {args.rate:g} req/s; watching {len(roles)} processes")

    load = drill.SteadyLoad(url, args.rate, bodies=drill.request_bodies(256)).start()
    warm_s = max(30.0, 0.2 * minutes * 60)
    ingress = serve.get_app_handle("orml")
    heap: list[dict] = []  # the ingress's traced heap over time (--heap)
    t0 = time.monotonic()
    times: list[float] = []
    series: dict[str, list[float | None]] = {names[p]: [] for p in roles}
    while (elapsed := time.monotonic() - t0) < minutes * 60:
        times.append(elapsed)
        for pid in roles:
            series[names[pid]].append(rss_mb(pid))
        if args.heap and elapsed >= warm_s:
            report = ingress.heap_growth.remote(limit=15).result(timeout_s=60)
            heap.append({"t_s": round(elapsed, 1), "traced_mb": report["traced_mb"]})
        if len(times) % 12 == 1:
            done = len(load.samples)
            traced = f", ingress heap {heap[-1]['traced_mb']} MB" if heap else ""
            log(f"  {elapsed / 60:4.1f} min: {done} requests, {len(load.failed())} failed{traced}")
        time.sleep(SAMPLE_EVERY_S)
    samples = load.stop()
    if args.heap:
        report = ingress.heap_growth.remote(limit=15).result(timeout_s=60)
        write_csv(args.out / "soak-heap.csv", heap)
        print_heap(report, heap)
    local.stop()

    t = np.array(times)
    rows = []
    for name, values in series.items():
        v = np.array([np.nan if x is None else x for x in values])
        after = (t >= warm_s) & ~np.isnan(v)
        if after.sum() < 3:
            continue
        start, end = v[after][0], v[after][-1]
        slope = np.polyfit(t[after] / 60, v[after], 1)[0]
        rows.append(
            {
                "process": name,
                "rss_after_warmup_mb": round(float(start), 1),
                "rss_end_mb": round(float(end), 1),
                "growth_pct": round(float((end - start) / start * 100), 2),
                "trend_mb_per_min": round(float(slope), 3),
            }
        )
    write_csv(args.out / "soak.csv", rows)
    plot(times, series, warm_s, args.out / "soak.png")
    ok = sum(s.status == 200 for s in samples)
    print(
        f"requests: {len(samples)} ({len(samples) / (minutes * 60):.1f}/s), failed: "
        f"{len(samples) - ok}; warm-up {warm_s:.0f} s of {minutes * 60:.0f} s"
    )
    print("| process | RSS after warm-up MB | RSS end MB | growth % | trend MB/min |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['process']} | {r['rss_after_warmup_mb']} | {r['rss_end_mb']} | "
            f"{r['growth_pct']} | {r['trend_mb_per_min']} |"
        )
    worst = max((r["growth_pct"] for r in rows), default=0.0)
    print(f"\nlargest growth after warm-up: {worst:.2f}% (target <= {GROWTH_TARGET * 100:.0f}%)")
    if args.json:
        import json

        args.json.write_text(
            json.dumps(
                {"rows": rows, "requests": len(samples), "failed": len(samples) - ok}, indent=2
            )
        )


if __name__ == "__main__":
    main()
