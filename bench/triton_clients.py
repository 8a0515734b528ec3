"""Triton's own Python clients as the load: the ETR model over the Open Inference Protocol.

    python bench/triton_clients.py [--quick] [--rounds 3] [--seconds 6] [--rows 1]
                                   [--concurrency 1 8] [--json PATH] [--out DIR]

What a Triton user's load loop sees against ``orml serve``: ``tritonclient.http`` and
``tritonclient.grpc`` calling ``infer`` on ``etr`` (``--rows`` feature rows a request, binary
tensors as the clients send them), each from ``--concurrency`` threads with a client each, for
``--seconds``. The baseline, measured in the same run alternating with them: the same orders
through the product's own API (``POST /v1/etr`` with httpx, which computes the features
server-side). The app as deploy.yaml runs it on the CPU, caches off (every request computes).
The load loop is Python and shares the two cores with the app: compare within the run.

After the loads, the server's own statistics (Triton's statistics extension, read with the
same client) say how much of a request was queueing and computing in the model, per request.
Writes DIR/triton_clients.csv, DIR/triton_clients.png and (--json) every run.
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

from ops import local
from ops.hostile import order
from serve_app.config import DispatchAppArgs

CLIENTS = ("v1 HTTP (httpx)", "v2 HTTP (tritonclient)", "v2 gRPC (tritonclient)")
APP = {"application": "orml"}  # Serve's gRPC proxy: the app's name


def make_call(kind: str, http: str, grpc: str, rows: int) -> Callable[[], None]:
    """One client of ``kind`` and a call that sends it one request of ``rows`` orders."""
    from etr import features_from_orders
    from serve_app.schemas import OrderIn

    orders = [order(k) for k in range(rows)]
    features = features_from_orders([OrderIn(**o).to_domain() for o in orders])
    if kind.startswith("v1"):
        import httpx

        client = httpx.Client(base_url=http, timeout=30)
        body = json.dumps({"orders": orders}).encode()
        headers = {"content-type": "application/json"}

        def v1() -> None:
            client.post("/v1/etr", content=body, headers=headers).raise_for_status()

        return v1
    if "HTTP" in kind:
        import tritonclient.http as triton

        client = triton.InferenceServerClient(http.removeprefix("http://"))
        tensor = triton.InferInput("features", list(features.shape), "FP32")
        tensor.set_data_from_numpy(features, binary_data=True)
        out = [triton.InferRequestedOutput("minutes", binary_data=True)]
        return lambda: client.infer("etr", [tensor], outputs=out).as_numpy("minutes")
    import tritonclient.grpc as triton_grpc

    client = triton_grpc.InferenceServerClient(grpc)
    tensor = triton_grpc.InferInput("features", list(features.shape), "FP32")
    tensor.set_data_from_numpy(features)
    return lambda: client.infer("etr", [tensor], headers=APP).as_numpy("minutes")


def load(kind: str, http: str, grpc: str, rows: int, concurrency: int, seconds: float) -> dict:
    """``concurrency`` threads calling for ``seconds``: req/s, p50 and p99 ms, errors."""
    # Each thread makes its own client (tritonclient.http's is gevent's: one thread only),
    # warms it, then all start together.
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors = [0] * concurrency
    first_error: list[str] = []
    ready = threading.Barrier(concurrency + 1)
    stop_at = [0.0]

    def worker(k: int) -> None:
        call = make_call(kind, http, grpc, rows)
        call()
        ready.wait()
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                call()
            except Exception as exc:
                errors[k] += 1
                if not first_error:
                    first_error.append(f"{type(exc).__name__}: {exc}"[:200])
                continue
            latencies[k].append((time.perf_counter() - t0) * 1e3)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + 1e9  # set for real once every client is warm
    ready.wait()
    start = time.perf_counter()
    stop_at[0] = start + seconds
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    ms = np.concatenate([np.asarray(x) for x in latencies]) if any(latencies) else np.zeros(1)
    return {
        "rps": len(ms) / elapsed,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "errors": sum(errors),
        "first_error": first_error[0] if first_error else "",
    }


def server_statistics(http: str) -> dict:
    """The serving version's statistics, per request: queue and compute ms, rows a call."""
    import tritonclient.http as triton

    stats = triton.InferenceServerClient(http.removeprefix("http://")).get_inference_statistics(
        "etr"
    )
    (s,) = [m for m in stats["model_stats"] if m["inference_count"]]
    inference = s["inference_stats"]
    n = max(1, inference["success"]["count"])
    return {
        "version": s["version"],
        "requests": inference["success"]["count"],
        "failed": inference["fail"]["count"],
        "queue_ms_per_request": inference["queue"]["ns"] / n / 1e6,
        "compute_ms_per_request": inference["compute_infer"]["ns"] / n / 1e6,
        "in_model_ms_per_request": inference["success"]["ns"] / n / 1e6,
        "rows_per_call": s["inference_count"] / max(1, s["execution_count"]),
    }


def main() -> None:
    ap = parser(__doc__, "one round, 3 s steps, concurrency 1 and 8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rows", type=int, default=1, help="orders (feature rows) per request")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rounds, seconds, levels = args.rounds, args.seconds, args.concurrency
    if args.quick:
        rounds, seconds, levels = 1, 3.0, [1, 8]
    runs: list[dict] = []
    with local.local_serve(num_cpus=4, namespace="bench-triton-clients") as ep:
        log("starting the app (deploy.yaml's CPU settings, caches off) ...")
        local.run_app(
            DispatchAppArgs(
                backend="numpy",
                etr_runtime="onnxruntime",
                cache={"enabled": False, "responses": False},
            )
        )
        local.wait_ready(ep.http)
        for r in range(rounds):
            for c in levels:
                for kind in CLIENTS:
                    got = {
                        "round": r,
                        "client": kind,
                        "concurrency": c,
                        **load(kind, ep.http, ep.grpc, args.rows, c, seconds),
                    }
                    runs.append(got)
                    log(
                        f"  round {r} c={c:<3} {kind:<24} {got['rps']:7.0f} req/s "
                        f"p50 {got['p50_ms']:6.1f} p99 {got['p99_ms']:6.1f} ms "
                        f"errors {got['errors']} {got['first_error']}"
                    )
        server = server_statistics(ep.http)
    table = summarize(runs, levels)
    print_table(table, levels, server, args.rows)
    write_csv(args.out / "triton_clients.csv", runs)
    plot(table, levels, args.out / "triton_clients.png")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"rows": args.rows, "runs": runs, "summary": table, "server": server}, indent=1
            )
        )


def summarize(runs: list[dict], levels: list[int]) -> dict:
    """Medians per client and concurrency over the rounds."""
    out: dict = {}
    for kind in CLIENTS:
        out[kind] = {}
        for c in levels:
            mine = [r for r in runs if r["client"] == kind and r["concurrency"] == c]
            out[kind][c] = {
                k: statistics.median(r[k] for r in mine) for k in ("rps", "p50_ms", "p99_ms")
            }
            out[kind][c]["errors"] = sum(r["errors"] for r in mine)
    return out


def print_table(table: dict, levels: list[int], server: dict, rows: int) -> None:
    base = CLIENTS[0]
    print(f"ETR, {rows} order(s) a request (median of the rounds)\n")
    print("| client | concurrency | req/s | p50 ms | p99 ms | errors | req/s vs /v1/etr |")
    print("|---|---|---|---|---|---|---|")
    for c in levels:
        for kind in CLIENTS:
            got = table[kind][c]
            ratio = got["rps"] / table[base][c]["rps"]
            print(
                f"| {kind} | {c} | {got['rps']:.0f} | {got['p50_ms']:.1f} | "
                f"{got['p99_ms']:.1f} | {got['errors']} | {ratio:.2f}x |"
            )
    print(
        f"\nthe server's statistics (v{server['version']}, {server['requests']} requests, "
        f"{server['failed']} failed): queue {server['queue_ms_per_request']:.3f} ms, compute "
        f"{server['compute_ms_per_request']:.3f} ms, in the model "
        f"{server['in_model_ms_per_request']:.3f} ms per request; "
        f"{server['rows_per_call']:.1f} rows a model call"
    )


def plot(table: dict, levels: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for kind in CLIENTS:
        ax1.plot(levels, [table[kind][c]["rps"] for c in levels], marker="o", label=kind)
        ax2.plot(levels, [table[kind][c]["p99_ms"] for c in levels], marker="o", label=kind)
    ax1.set(xlabel="concurrency (threads)", ylabel="requests/s", title="throughput")
    ax2.set(xlabel="concurrency (threads)", ylabel="p99 ms", title="p99 latency")
    ax1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
