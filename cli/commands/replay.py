"""``orml replay``: replay a real MDRP delivery day through the dispatch, round by round."""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml replay`` and its options to the command line's subcommands."""
    rp = sub.add_parser(
        "replay", help="replay a real MDRP delivery day through the dispatch, round by round"
    )
    rp.add_argument("instance", type=Path, help="an MDRP instance folder")
    rp.add_argument("--round-s", type=int, default=60, help="seconds between rounds (minutes)")
    rp.add_argument("--max-bundle", type=int, default=3, help="orders per bundle, at most")
    rp.add_argument(
        "--late-weight",
        type=float,
        default=4.0,
        help="minutes of driving a minute of delay is worth",
    )
    rp.add_argument(
        "--plans",
        type=int,
        default=None,
        help="weight variants each round is planned under, the cheapest schedule kept "
        "(default: the policy's, 5)",
    )
    rp.add_argument(
        "--round-budget-ms",
        type=float,
        default=None,
        help="wall-clock budget per round for those plans (default: none; at least one plan)",
    )
    rp.add_argument(
        "--reposition-min",
        type=int,
        default=None,
        help="send idle couriers to a restaurant at most this many minutes away (0: never; "
        "default: the policy's, 20)",
    )
    rp.add_argument(
        "--rollout-min",
        type=int,
        default=None,
        help="judge plans that differ by replaying the next this many minutes on the orders "
        "placed so far (0: by one round's pricing; default: the policy's, 5)",
    )
    rp.add_argument(
        "--defer-min",
        type=int,
        default=None,
        help="plan each round once more without the orders ready more than this many minutes "
        "from now (0: not, the default)",
    )
    rp.add_argument("--out", type=Path, default=None, help="solution folder (default replay/NAME)")
    rp.add_argument("--url", default=None, help="send every round to this app's /v1/dispatch")
    rp.add_argument(
        "--speedup",
        type=float,
        default=None,
        help="with --url: pace rounds at this many x real time (default: as fast as answered)",
    )
    rp.add_argument("--quiet", action="store_true", help="no progress lines")
    rp.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from planner.mdrp import MdrpInstanceError, ReplayPolicy, evaluate, load_instance, replay
    from planner.mdrp.solution import write_solution

    if args.round_s % 60:
        print(
            "orml replay: --round-s must be a whole number of minutes (MDRP's clock)",
            file=sys.stderr,
        )
        return 2
    try:
        inst = load_instance(args.instance)
    except MdrpInstanceError as exc:
        print(f"orml replay: {exc}", file=sys.stderr)
        return 2
    try:
        policy = ReplayPolicy(
            round_min=args.round_s // 60,
            max_bundle=args.max_bundle,
            late_weight=args.late_weight,
            round_budget_ms=args.round_budget_ms,
            **{
                k: v
                for k, v in (
                    ("plans", args.plans),
                    ("reposition_min", args.reposition_min),
                    ("rollout_min", args.rollout_min),
                    ("defer_min", args.defer_min),
                )
                if v is not None
            },
        )
    except ValueError as exc:
        print(f"orml replay: {exc}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    last = [0.0]

    def progress(t: int, end: int) -> None:
        if not args.quiet and time.perf_counter() - last[0] > 2.0:
            last[0] = time.perf_counter()
            print(f"  minute {t} of {end}", file=sys.stderr, flush=True)

    served = None
    if args.url:
        from ops.replay_client import ServedDecider

        with ServedDecider(args.url, speedup=args.speedup) as decide:
            day = replay(inst, policy, decide, progress=progress)
        served = {"url": args.url, "speedup": args.speedup, **decide.summary()}
    else:
        day = replay(inst, policy, progress=progress)
    seconds = time.perf_counter() - t0
    out = args.out or Path("replay") / inst.name
    write_solution(inst, day, out)
    ev = evaluate(args.instance, out)
    summary = {
        "instance": inst.name,
        "seconds": round(seconds, 2),
        "rounds": day.rounds,
        "dispatch_calls": day.plans,
        "rollouts": day.rollouts,
        "dispatch_ms": round(day.dispatch_ms, 1),
        "plan_ms": _percentiles(day.plan_ms),
        "policy": asdict(policy),
        **({"served": served} if served else {}),
        **ev.as_dict(),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0 if ev.feasible else 1


def _percentiles(values: list[float]) -> dict[str, float]:
    """p50 and p99 (ms) of the time each round's plan took: every variant and the choice."""
    ordered = sorted(values)
    if not ordered:
        return {"p50": 0.0, "p99": 0.0}
    return {
        q: round(ordered[min(len(ordered) - 1, int(f * len(ordered)))], 1)
        for q, f in (("p50", 0.5), ("p99", 0.99))
    }
