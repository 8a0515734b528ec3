"""``orml round``: plan one generated dispatch round and print the plan."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import asdict


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml round`` and its options to the command line's subcommands."""
    rnd = sub.add_parser("round", help="plan one generated dispatch round and print the plan")
    rnd.add_argument("--riders", type=int, default=1000)
    rnd.add_argument("--orders", type=int, default=300)
    rnd.add_argument("--seed", type=int, default=0)
    rnd.add_argument(
        "--backend",
        choices=["auto", "numpy", "cupy"],
        default=None,
        help="default: ORML_BACKEND, else auto (CuPy when a GPU works)",
    )
    rnd.add_argument("--max-orders-per-rider", type=int, default=1)
    rnd.add_argument(
        "--candidates",
        type=int,
        default=None,
        help="price each order against its K nearest riders only",
    )
    rnd.add_argument("--no-improve", action="store_true", help="skip route improvement")
    rnd.add_argument("--json", action="store_true", help="print the whole plan as JSON")
    rnd.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from domain import DispatchWeights
    from planner import dispatch_round, generate_round

    weights = DispatchWeights(
        max_orders_per_rider=args.max_orders_per_rider, candidate_riders=args.candidates
    )
    round_ = generate_round(args.riders, args.orders, seed=args.seed, weights=weights)
    # The first round in a process loads the compiled kernels (seconds): do it first, and
    # report it apart, so the round's own timings are what a warm replica pays.
    t0 = time.perf_counter()
    dispatch_round(generate_round(8, 4, seed=1), backend=args.backend)
    warm_up_ms = (time.perf_counter() - t0) * 1e3
    plan = dispatch_round(round_, backend=args.backend, improve_routes=not args.no_improve)
    if args.json:
        out = asdict(plan)
        out["routes"] = {
            rid: [{"order_id": s.order_id, "kind": s.kind.value} for s in route.stops]
            for rid, route in plan.routes.items()
        }
        json.dump(out, sys.stdout, default=str, indent=2)
        print()
        return 0
    reasons = Counter(u.reason.value for u in plan.unassigned)
    print(f"backend            {plan.backend}")
    print(f"riders x orders    {args.riders} x {args.orders}")
    print(f"assigned           {len(plan.assignments)}")
    print(f"unassigned         {len(plan.unassigned)} {dict(reasons) if reasons else ''}")
    print(f"added travel       {plan.cost.travel_s:,.0f} s")
    print(f"added lateness     {plan.cost.lateness_s:,.0f} s")
    print(f"weighted cost      {plan.cost.total:,.0f}")
    print("timings (ms)       " + ", ".join(f"{k}={v:.1f}" for k, v in plan.timings_ms.items()))
    print(f"warm-up (ms)       {warm_up_ms:.1f} (once per process: kernel load, not the round)")
    for a in plan.assignments[:5]:
        stops = " -> ".join(
            f"{s.kind.value[0].upper()}:{s.order_id}" for s in plan.routes[a.rider_id].stops
        )
        print(f"  {a.order_id} -> {a.rider_id} (cost {a.cost:.0f}): {stops}")
    return 0
