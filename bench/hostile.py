"""Hostile callers: what requests built to break the edge cost, beside a legal request at the
limits of the same endpoint.

    python bench/hostile.py [--quick] [--repeat 3] [--json PATH] [--out DIR]

Starts a local Ray and the app with deploy.yaml's limits (16 MiB bodies, 5000 riders, 2000
orders, 32 stops; --quick: the test suite's, 2 MiB and 300) and sends every request of the
catalogue in ``ops.hostile`` over HTTP and gRPC ``--repeat`` times, one at a time.
Per request: its answer (status, bytes), the median time, and the growth of the ingress
replica's peak resident memory while it ran; the baseline is the legal request of the same
endpoint at its limits, in the same run. Then a static solve's overrun past its time limit
(the answer's own solve time minus the limit) and the largest gRPC message the transport
takes. Writes DIR/hostile.csv, DIR/hostile.png and (--json) every row.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from common import log, parser, write_csv

from ops import hostile, local
from serve_app.config import DispatchAppArgs, Limits

QUICK_LIMITS = Limits(max_body_bytes=2 << 20, max_riders=300, max_orders=300, max_route_stops=16)


def cases_rows(
    ep: local.LocalServe,
    limits: Limits,
    repeat: int,
    memory: hostile.IngressMemory | None,
    legal_round: bool,
) -> list[dict]:
    rows = []
    round_at = (limits.max_riders, limits.max_orders) if legal_round else None
    senders = [
        (hostile.http_cases(limits, round_at), hostile.http_sender(ep.http)),
        (hostile.grpc_cases(limits), hostile.grpc_sender(ep.grpc)),
    ]
    for cases, send in senders:
        for case in cases:
            runs = [hostile.measure(case, send, memory) for _ in range(repeat)]
            peaks = [r.peak_mb for r in runs if r.peak_mb is not None]
            rows.append(
                {
                    "protocol": "gRPC" if case.grpc else "HTTP",
                    "case": case.name,
                    "body_mb": round(runs[0].body_bytes / 2**20, 3),
                    "status": str(runs[-1].status),
                    "expected": runs[-1].status in case.expect,
                    "answer_bytes": runs[-1].answer_bytes,
                    "median_ms": round(statistics.median(r.seconds for r in runs) * 1e3, 1),
                    "peak_mb": round(max(peaks), 1) if peaks else None,
                    "baseline": case.what == "baseline",
                }
            )
            log(
                f"  {rows[-1]['protocol']:<4} {case.name}: {rows[-1]['status']} "
                f"{rows[-1]['median_ms']} ms, peak +{rows[-1]['peak_mb']} MB"
            )
    return rows


def overrun_rows(ep: local.LocalServe, quick: bool) -> list[dict]:
    """The answer's solve time past its limit, for instances whose construction alone takes
    longer than the limit."""
    rows = []
    with httpx.Client(base_url=ep.http, timeout=120) as client:
        for pairs in (100,) if quick else (100, 250, 500):
            for limit in (0.05, 0.5) if quick else (0.05, 0.2, 1.0):
                body = hostile.solve_body(pairs, limit, seed=pairs)
                r = client.post("/v1/routes/solve", json=body, headers={"x-timeout-ms": "60000"})
                got = r.json()
                rows.append(
                    {
                        "pairs": pairs,
                        "time_limit_s": limit,
                        "status": r.status_code,
                        "solve_s": round(got.get("seconds", float("nan")), 3),
                        "overrun_s": round(got.get("seconds", float("nan")) - limit, 3),
                        "unassigned_tasks": len(got.get("unassigned", [])),
                    }
                )
                log(f"  solve {pairs} pairs at {limit} s: {rows[-1]}")
    return rows


def grpc_cap_rows(ep: local.LocalServe, limits: Limits) -> list[dict]:
    """Dispatch messages just under and just over the body limit: who answers them."""
    import grpc

    rows = []
    options = [("grpc.max_send_message_length", 1 << 30)]
    with grpc.insecure_channel(ep.grpc, options=options) as channel:
        call = channel.unary_unary(
            "/orml.v1.Orml/Dispatch", request_serializer=bytes, response_deserializer=bytes
        )
        for delta in (-4096, +4096):
            size = limits.max_body_bytes + delta
            try:
                call(b"\x12\x00" * (size // 2), metadata=[("application", "orml")], timeout=60)
                code, details = "OK", ""
            except grpc.RpcError as err:
                code, details = err.code().name, err.details() or ""
            rows.append(
                {
                    "message_bytes": size,
                    "status": code,
                    "answered_by": "the transport" if "larger than max" in details else "the app",
                    "details": details[:90],
                }
            )
            log(f"  dispatch message of {size} bytes: {code} {details[:90]}")
    return rows


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [f"{r['protocol']}: {r['case']}" for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 0.32 * len(rows) + 1.2), sharey=True)
    colours = ["tab:green" if r["baseline"] else "tab:red" for r in rows]
    left.barh(names, [r["median_ms"] for r in rows], color=colours)
    left.set_xlabel("median time, ms")
    right.barh(names, [r["peak_mb"] or 0 for r in rows], color=colours)
    right.set_xlabel("ingress peak memory growth, MB")
    left.invert_yaxis()
    fig.suptitle("Hostile requests (red) beside legal ones at the limits (green)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = parser(__doc__, "the test suite's smaller limits, one repeat, fewer solves")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    limits = QUICK_LIMITS if args.quick else Limits()
    repeat = 1 if args.quick else args.repeat
    app_args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", limits=limits)
    with local.local_serve(num_cpus=4, namespace="bench-hostile") as ep:
        local.run_app(app_args)
        local.wait_ready(ep.http)
        pid = hostile.ingress_pid()
        memory = None if pid is None else hostile.IngressMemory(pid)
        log(f"limits {limits.model_dump()}; ingress pid {pid}")
        rows = cases_rows(ep, limits, repeat, memory, legal_round=not args.quick)
        overrun = overrun_rows(ep, args.quick)
        cap = grpc_cap_rows(ep, limits)
    write_csv(args.out / "hostile.csv", rows)
    plot(rows, args.out / "hostile.png")
    print("| protocol | request | body MiB | answer | bytes | median ms | peak MB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        mark = "" if r["expected"] else " (UNEXPECTED)"
        print(
            f"| {r['protocol']} | {r['case']} | {r['body_mb']} | {r['status']}{mark} | "
            f"{r['answer_bytes']} | {r['median_ms']} | {r['peak_mb']} |"
        )
    print("\n| pairs | time limit s | solve s | overrun s | tasks unplaced |")
    print("|---|---|---|---|---|")
    for r in overrun:
        print(
            f"| {r['pairs']} | {r['time_limit_s']} | {r['solve_s']} | {r['overrun_s']} | "
            f"{r['unassigned_tasks']} |"
        )
    print("\n| gRPC message bytes | answer | answered by | details |")
    print("|---|---|---|---|")
    for r in cap:
        print(f"| {r['message_bytes']} | {r['status']} | {r['answered_by']} | {r['details']} |")
    if args.json:
        import json

        args.json.write_text(
            json.dumps(
                {
                    "limits": limits.model_dump(),
                    "requests": rows,
                    "solve_overrun": overrun,
                    "grpc_cap": cap,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
