"""``orml loadtest``: sweep concurrency or request rate against a running app (HTTP, gRPC)."""

from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_CONCURRENCY = (1, 2, 4, 8, 16, 32)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml loadtest`` and its options to the command line's subcommands."""
    lt = sub.add_parser(
        "loadtest", help="sweep concurrency or request rate against a running app (HTTP, gRPC)"
    )
    lt.add_argument(
        "url", help="the app's HTTP address (http://localhost:8000) or, with --grpc, host:port"
    )
    lt.add_argument(
        "--grpc",
        dest="protocol",
        action="store_const",
        const="grpc",
        default="http",
        help="call the gRPC API (protobuf) instead of HTTP",
    )
    lt.add_argument("--endpoint", choices=["dispatch", "etr"], default="dispatch")
    mode = lt.add_mutually_exclusive_group()
    mode.add_argument("--concurrency", type=int, nargs="+", help="closed-loop levels, e.g. 1 2 4 8")
    mode.add_argument("--rate", type=float, nargs="+", help="open-loop requests/s, e.g. 10 20 40")
    lt.add_argument("--duration", type=float, default=10.0, help="seconds per step")
    lt.add_argument("--stop-p99-ms", type=float, default=None, help="stop after a step over it")
    lt.add_argument("--requests", type=int, default=64, help="distinct bodies to cycle through")
    lt.add_argument("--riders", type=int, default=100, help="dispatch: riders per round")
    lt.add_argument("--orders", type=int, default=20, help="orders per round / ETR request")
    lt.add_argument("--mdrp-day", type=Path, default=None, help="dispatch: a real day's rounds")
    lt.add_argument("--token", default=None, help="an API key (Authorization: Bearer)")
    lt.add_argument("--out", type=Path, default=Path("loadtest"), help="CSV and PNG go here")
    lt.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ops import loadtest

    requests = loadtest.requests_for(
        args.endpoint,
        args.url.rstrip("/"),
        count=args.requests,
        riders=args.riders,
        orders=args.orders,
        mdrp_day=args.mdrp_day,
        token=args.token,
        protocol=args.protocol,
    )
    steps = loadtest.sweep(
        args.url,
        requests,
        concurrency=args.concurrency or (() if args.rate else DEFAULT_CONCURRENCY),
        rates=args.rate or (),
        duration_s=args.duration,
        stop_p99_ms=args.stop_p99_ms,
        progress=loadtest.progress_bar,
        protocol=args.protocol,
        endpoint=args.endpoint,
        token=args.token,
    )
    paths = loadtest.write_report(steps, args.out, f"{args.endpoint} at {args.url}")
    print("| step | answered/s | p50 ms | p90 ms | p99 ms | shed | errors | generator CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for s in steps:
        print(
            f"| {s.mode} {s.value:g} | {s.throughput_rps} | {s.p50_ms} | {s.p90_ms} | "
            f"{s.p99_ms} | {s.shed} | {s.errors} | {s.generator_cpu:.0%} |"
        )
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0
