"""Load the Serve app over HTTP with open-loop Poisson arrivals at increasing rates.

    python bench/serve_load.py [--quick] [--json PATH] [--out DIR]

Starts a local Ray with two copies of the app in the same run: ``/b`` (ETR batching on) and
``/u`` (batching off, every request its own model call), on the CPU backends. For each endpoint
and variant it offers rates from a ladder (Poisson arrivals, loopback only, bounded duration)
and records achieved QPS, p50/p99 latency and errors. It also times one dispatch round over
HTTP against calling ``dispatch_round`` directly in this process (the Serve overhead).
Writes DIR/serve_load.csv and DIR/serve_load.png.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import free_port, log, parser, write_csv

from etr import features_from_orders, load_artifact, load_runtime
from planner import dispatch_round, generate_round
from serve_app.schemas import DispatchRequest, OrderIn

P99_TARGET_MS = 100.0


THROUGHPUT_ENV = {"RAY_SERVE_THROUGHPUT_OPTIMIZED": "1", "RAY_SERVE_ENABLE_HA_PROXY": "1"}


def start_apps(port: int, throughput_mode: bool = True) -> None:
    import os

    if throughput_mode:  # Ray Serve's high-throughput mode (Ray >= 2.55): HAProxy + direct gRPC
        os.environ.update(THROUGHPUT_ENV)
    import ray
    from ray import serve

    from actors.etr_model import EtrDeployment
    from actors.or_solver import OrSolverDeployment
    from serve_app.app import DispatchIngress
    from serve_app.config import DispatchAppArgs

    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime")
    for prefix, batching in (("/b", True), ("/u", False)):
        etr = EtrDeployment.options(
            user_config={
                "max_batch_size": 512,
                "batch_wait_timeout_s": 0.002,
                "batching": batching,
            },
            max_ongoing_requests=1024,
        ).bind(None, "onnxruntime")
        app = DispatchIngress.options(max_ongoing_requests=1024).bind(
            OrSolverDeployment.bind("numpy"), etr, args.model_dump()
        )
        serve.run(app, name=prefix.strip("/"), route_prefix=prefix)


async def open_loop(url: str, bodies: list[bytes], rate: float, duration_s: float, seed: int):
    """Send at Poisson times for duration_s; returns (latencies_ms, errors, achieved_qps)."""
    import httpx

    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, int(rate * duration_s * 1.5) + 10)
    starts = np.cumsum(gaps)
    starts = starts[starts < duration_s]
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=512, max_keepalive_connections=512)
    async with httpx.AsyncClient(timeout=10.0, limits=limits) as client:
        t0 = time.perf_counter()

        async def one(k: int, at: float) -> None:
            nonlocal errors
            delay = at - (time.perf_counter() - t0)
            if delay > 0:
                await asyncio.sleep(delay)
            sent = time.perf_counter()
            try:
                r = await client.post(
                    url,
                    content=bodies[k % len(bodies)],
                    headers={"content-type": "application/json"},
                )
                if r.status_code == 200:
                    latencies.append((time.perf_counter() - sent) * 1e3)
                else:
                    errors += 1
            except Exception:
                errors += 1

        await asyncio.gather(*(one(k, at) for k, at in enumerate(starts)))
        elapsed = time.perf_counter() - t0
    return latencies, errors, len(latencies) / max(elapsed, duration_s)


def sweep(url: str, bodies: list[bytes], rates: list[float], duration_s: float, label: str, log):
    rows = []
    for rate in rates:
        lat, errors, qps = asyncio.run(open_loop(url, bodies, rate, duration_s, seed=int(rate)))
        p50 = float(np.percentile(lat, 50)) if lat else float("nan")
        p99 = float(np.percentile(lat, 99)) if lat else float("nan")
        rows.append(
            {
                "case": label,
                "offered_rps": rate,
                "achieved_rps": qps,
                "p50_ms": p50,
                "p99_ms": p99,
                "errors": errors,
                "sent": len(lat) + errors,
            }
        )
        log(
            f"  {label:<22} offered {rate:7.0f}/s  achieved {qps:7.1f}/s  "
            f"p50 {p50:7.1f} ms  p99 {p99:8.1f} ms  errors {errors}"
        )
        if errors > 0.05 * (len(lat) + errors) or p99 > 20 * P99_TARGET_MS:
            break  # saturated; higher rates only queue
    return rows


def max_ok(rows: list[dict], case: str) -> float:
    ok = [
        r["achieved_rps"]
        for r in rows
        if r["case"] == case and r["p99_ms"] <= P99_TARGET_MS and r["errors"] == 0
    ]
    return max(ok, default=0.0)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for case in dict.fromkeys(r["case"] for r in rows):
        mine = [r for r in rows if r["case"] == case]
        ax.plot([r["achieved_rps"] for r in mine], [r["p99_ms"] for r in mine], "o-", label=case)
    ax.axhline(P99_TARGET_MS, color="grey", ls="--", lw=1, label="p99 target")
    ax.set_xlabel("achieved requests / s")
    ax.set_ylabel("p99 latency (ms)")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    ax.set_title("orml-serve under open-loop Poisson load (2-core CPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = parser(__doc__, "short steps, fewer rates (< 1 min)")
    ap.add_argument(
        "--ray-default-mode",
        action="store_true",
        help="without Ray Serve's throughput mode (HAProxy, direct gRPC)",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    import httpx
    from ray import serve

    port = free_port()
    log("starting Ray and two copies of the app (batching on / off) ...")
    start_apps(port, throughput_mode=not args.ray_default_mode)
    base = f"http://127.0.0.1:{port}"
    duration = 2.0 if args.quick else 6.0
    etr_rates = [50, 200, 400] if args.quick else [50, 100, 200, 300, 400, 600, 800, 1200]
    disp_rates = [5, 20] if args.quick else [5, 10, 20, 40, 60, 80]

    orders = generate_round(0, 256, seed=3).orders
    etr_bodies = [
        json.dumps({"orders": [json.loads(OrderIn.from_domain(o).model_dump_json())]}).encode()
        for o in orders
    ]
    rounds = [generate_round(100, 20, seed=50 + k) for k in range(8)]
    disp_bodies = [DispatchRequest.from_domain(r).model_dump_json().encode() for r in rounds]

    rows = []
    for prefix, label in (("/b", "etr batched"), ("/u", "etr unbatched")):
        rows += sweep(f"{base}{prefix}/v1/etr", etr_bodies, etr_rates, duration, label, log)
    rows += sweep(
        f"{base}/b/v1/dispatch", disp_bodies, disp_rates, duration, "dispatch 100x20", log
    )

    # Serve overhead: one round, sequential requests, against the library in this process.
    round_ = rounds[0]
    rt = load_runtime(load_artifact("etr"), "onnxruntime")
    minutes = rt.predict(features_from_orders(round_.orders))
    direct, over_http = [], []
    with httpx.Client(base_url=base, timeout=30) as c:
        for _ in range(5 if args.quick else 20):
            t0 = time.perf_counter()
            dispatch_round(round_, backend="numpy", etr_minutes=minutes)
            direct.append((time.perf_counter() - t0) * 1e3)
            t0 = time.perf_counter()
            assert (
                c.post(
                    "/b/v1/dispatch",
                    content=disp_bodies[0],
                    headers={"content-type": "application/json"},
                ).status_code
                == 200
            )
            over_http.append((time.perf_counter() - t0) * 1e3)
    overhead = {
        "direct_p50_ms": statistics.median(direct),
        "http_p50_ms": statistics.median(over_http),
    }
    overhead["overhead_p50_ms"] = overhead["http_p50_ms"] - overhead["direct_p50_ms"]
    serve.shutdown()

    b, u = max_ok(rows, "etr batched"), max_ok(rows, "etr unbatched")
    print(f"\nopen-loop Poisson load, {duration:.0f} s per step, loopback HTTP, 2-core CPU")
    print(
        f"{'case':<18} {'offered/s':>9} {'achieved/s':>10} {'p50 ms':>8} {'p99 ms':>9} "
        f"{'errors':>6}"
    )
    for r in rows:
        print(
            f"{r['case']:<18} {r['offered_rps']:>9.0f} {r['achieved_rps']:>10.1f} "
            f"{r['p50_ms']:>8.1f} {r['p99_ms']:>9.1f} {r['errors']:>6}"
        )
    print(
        f"\nmax ETR throughput with p99 <= {P99_TARGET_MS:.0f} ms and no errors: batched "
        f"{b:.0f}/s, unbatched {u:.0f}/s, ratio {b / u if u else float('nan'):.2f}x"
    )
    print(
        f"dispatch 100x20 p50: direct {overhead['direct_p50_ms']:.1f} ms, over HTTP "
        f"{overhead['http_p50_ms']:.1f} ms, Serve overhead {overhead['overhead_p50_ms']:.1f} ms"
    )
    write_csv(args.out / "serve_load.csv", rows)
    plot(rows, args.out / "serve_load.png")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": rows, "overhead": overhead, "max_ok": {"batched": b, "unbatched": u}},
                indent=2,
            )
        )
    log(f"wrote {args.out / 'serve_load.csv'} and {args.out / 'serve_load.png'}")


if __name__ == "__main__":
    main()
