"""``orml example``: print a valid request body for an endpoint."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml example`` and its options to the command line's subcommands."""
    ex = sub.add_parser("example", help="print a valid request body for an endpoint")
    ex_sub = ex.add_subparsers(dest="what", required=True)
    exd = ex_sub.add_parser("dispatch", help="a generated round as /v1/dispatch JSON")
    exd.add_argument("--riders", type=int, default=50)
    exd.add_argument("--orders", type=int, default=20)
    exe = ex_sub.add_parser("etr", help="generated orders as /v1/etr JSON")
    exe.add_argument("--orders", type=int, default=5)
    exs = ex_sub.add_parser("solve", help="a Li & Lim instance as /v1/routes/solve JSON")
    exs.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=Path("data/pdptw/instances/lc101.txt"),
        help="a Li & Lim instance file (default: the bundled lc101)",
    )
    exs.add_argument("--time-limit", type=float, default=5.0, help="solver seconds")
    for p in (exd, exe, exs):
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--pretty", action="store_true", help="indented JSON")
        p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """A valid request body for one endpoint, on stdout."""
    from planner import generate_round
    from serve_app.schemas import DispatchRequest, EtrRequest, OrderIn, SolveRequest

    indent = 1 if args.pretty else None
    if args.what == "dispatch":
        round_ = generate_round(args.riders, args.orders, seed=args.seed)
        print(DispatchRequest.from_domain(round_).model_dump_json(indent=indent))
    elif args.what == "etr":
        orders = generate_round(0, args.orders, seed=args.seed).orders
        req = EtrRequest(orders=[OrderIn.from_domain(o) for o in orders])
        print(req.model_dump_json(indent=indent))
    else:
        from planner.pdptw.instance import PdptwInstanceError, load_instance

        try:
            instance = load_instance(args.source)
        except PdptwInstanceError as exc:
            print(f"orml example solve: {exc}", file=sys.stderr)
            return 2
        req = SolveRequest.from_instance(instance, args.time_limit, args.seed)
        print(req.model_dump_json(indent=indent))
    return 0
