"""The first requests after ready: does a new replica answer its first dispatch round as it
answers its tenth?

    python bench/first_request.py [--quick] [--requests 10] [--json PATH] [--out DIR]

Starts a local Ray and the app (NumPy solver, ONNX Runtime ETR), waits for ``/readyz`` to
answer 200, then sends ``--requests`` dispatch rounds of 300 x 100 (and, without --quick,
1000 x 300) one at a time, each a new round, over HTTP. Per request: its latency, the stage
timings the answer reports (decode, pack, solve, unpack) and the growth of the ingress
replica's peak resident memory while it ran. The baseline is the median of the requests after
the first, in the same run; the table gives the first's ratio to it. Writes
DIR/first_request.csv and DIR/first_request.png.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from common import log, parser, write_csv

from ops import hostile, local
from planner import generate_round
from serve_app.config import DispatchAppArgs, Limits
from serve_app.schemas import DispatchRequest

STAGES = ("decode_ms", "pack_ms", "solve_ms", "unpack_ms")


def request_rows(
    url: str, size: tuple[int, int], n: int, memory: hostile.IngressMemory | None
) -> list[dict]:
    rows = []
    with httpx.Client(base_url=url, timeout=120) as client:
        for k in range(n):
            body = DispatchRequest.from_domain(generate_round(*size, seed=1000 + k))
            payload = body.model_dump_json().encode()
            before = None
            if memory is not None:
                memory.reset_peak()
                before = memory.peak_mb()
            t0 = time.perf_counter()
            r = client.post(
                "/v1/dispatch",
                content=payload,
                headers={"content-type": "application/json", "x-timeout-ms": "60000"},
            )
            seconds = time.perf_counter() - t0
            r.raise_for_status()
            timings = r.json().get("timings_ms", {})
            peak = None if memory is None or before is None else memory.peak_mb() - before
            rows.append(
                {
                    "round": f"{size[0]} x {size[1]}",
                    "request": k + 1,
                    "ms": round(seconds * 1e3, 1),
                    **{s: round(timings.get(s, float("nan")), 1) for s in STAGES},
                    "peak_mb": None if peak is None else round(peak, 1),
                }
            )
            log(f"  {rows[-1]['round']} #{k + 1}: {rows[-1]['ms']} ms, peak +{peak} MB")
    return rows


def summary(rows: list[dict]) -> list[dict]:
    out = []
    for name in dict.fromkeys(r["round"] for r in rows):
        mine = [r for r in rows if r["round"] == name]
        later = statistics.median(r["ms"] for r in mine[1:])
        out.append(
            {
                "round": name,
                "first_ms": mine[0]["ms"],
                "later_median_ms": later,
                "ratio": round(mine[0]["ms"] / later, 2),
                "first_peak_mb": mine[0]["peak_mb"],
                "later_peak_mb": max((r["peak_mb"] or 0.0) for r in mine[1:]),
            }
        )
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name in dict.fromkeys(r["round"] for r in rows):
        mine = [r for r in rows if r["round"] == name]
        ax.plot([r["request"] for r in mine], [r["ms"] for r in mine], "o-", label=name)
    ax.set_xlabel("request after /readyz turned 200")
    ax.set_ylabel("latency, ms")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("Dispatch rounds on a new replica")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = parser(__doc__, "300 x 100 only, five requests")
    ap.add_argument("--requests", type=int, default=10)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    n = 5 if args.quick else args.requests
    sizes = [(300, 100)] if args.quick else [(300, 100), (1000, 300)]
    app_args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", limits=Limits())
    with local.local_serve(num_cpus=4, namespace="bench-first-request") as ep:
        local.run_app(app_args)
        local.wait_ready(ep.http)
        pid = hostile.ingress_pid()
        memory = None if pid is None else hostile.IngressMemory(pid)
        log(f"ready; ingress pid {pid}")
        rows = [row for size in sizes for row in request_rows(ep.http, size, n, memory)]
    write_csv(args.out / "first_request.csv", rows)
    plot(rows, args.out / "first_request.png")
    table = summary(rows)
    print(
        "| round | first ms | later ms (median) | first / later | first peak MB | later peak MB |"
    )
    print("|---|---|---|---|---|---|")
    for r in table:
        print(
            f"| {r['round']} | {r['first_ms']} | {r['later_median_ms']} | {r['ratio']}x | "
            f"{r['first_peak_mb']} | {r['later_peak_mb']} |"
        )
    if args.json:
        import json

        args.json.write_text(json.dumps({"summary": table, "requests": rows}, indent=1))


if __name__ == "__main__":
    main()
