"""``orml simulate``: a fleet day of many cities on heterogeneous GPUs, policy by policy."""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def default_mdrp_dir() -> Path:
    shared = ROOT.parent / "shared" / "data" / "mdrp"
    return shared if shared.is_dir() else ROOT / "data" / "mdrp"


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml simulate`` and its options to the command line's subcommands."""
    sp = sub.add_parser(
        "simulate",
        help="simulate a fleet day (many cities, mixed GPU types): cost and SLO per policy",
    )
    sp.add_argument("--scenario", type=Path, default=None, help="default fleet/scenario.yaml")
    sp.add_argument("--mdrp", type=Path, default=None, help="MDRP day folders (demand curves)")
    sp.add_argument("--cities", type=int, default=None, help="override the scenario's cities")
    sp.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    sp.add_argument("--quick", action="store_true", help="10 cities (a few minutes on 2 cores)")
    sp.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario setting (dotted key, YAML value), e.g. "
        "--set traffic.zone_rounds=spread",
    )
    sp.add_argument(
        "--policies",
        default="ours,serve_default,ffd,best_single_type,serve_default_equal_cost",
        help="comma-separated: ours, serve_default, ffd, best_single_type, "
        "serve_default_equal_cost; by name only: ours_peak_plan (the packer's peak plan at "
        "Busy 0.6, ours before tuning), ours_day (card types by the day's cost)",
    )
    sp.add_argument("--json", type=Path, default=None, help="write every figure here")
    sp.add_argument("--out", type=Path, default=Path("out/simulate"), help="table and PNG here")
    sp.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fleet.day import run_day
    from fleet.report import plot, table, write_json
    from fleet.scenario import SCENARIO_PATH, load_scenario

    scenario = load_scenario(args.scenario or SCENARIO_PATH, args.set)
    update = {}
    if args.quick:
        update["cities"] = 10
    if args.cities is not None:
        update["cities"] = args.cities
    if args.seed is not None:
        update["seed"] = args.seed
    scenario = scenario.model_copy(update=update)
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    result = run_day(
        scenario, args.mdrp or default_mdrp_dir(), policies, progress=lambda m: print(m, flush=True)
    )
    text = table(result)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "simulate.md").write_text(text + "\n")
    if plot(result, args.out / "simulate.png"):
        print(f"wrote {args.out / 'simulate.png'}")
    if args.json is not None:
        write_json(result, args.json)
        print(f"wrote {args.json}")
    return 0
