"""``orml solve``: solve a Li & Lim PDPTW instance, print a JSON summary."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml solve`` and its options to the command line's subcommands."""
    sol = sub.add_parser("solve", help="solve a Li & Lim PDPTW instance, print a JSON summary")
    sol.add_argument("instance", type=Path)
    sol.add_argument("--time-limit", type=float, default=10.0, help="seconds")
    sol.add_argument("--seed", type=int, default=0)
    sol.add_argument("--iterations", type=int, default=None, help="cap improvement steps")
    sol.add_argument("--out", type=Path, default=None, help="SINTEF-format solution file")
    sol.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from planner.pdptw.evaluate import evaluate, write_sintef
    from planner.pdptw.instance import PdptwInstanceError, load_instance
    from planner.pdptw.solve import solve

    try:
        inst = load_instance(args.instance)
    except PdptwInstanceError as exc:
        print(f"orml solve: {exc}", file=sys.stderr)
        return 2
    sol = solve(inst, time_limit_s=args.time_limit, seed=args.seed, iterations=args.iterations)
    ev = evaluate(inst, sol.routes)
    if args.out:
        write_sintef(sol.routes, args.out)
    out = {
        "instance": inst.name,
        "vehicles": ev.vehicles,
        "distance": round(ev.distance, 4),
        "feasible": ev.feasible and not sol.unassigned,
        "seconds": round(sol.seconds, 3),
        "iterations": sol.iterations,
    }
    print(json.dumps(out))
    return 0
