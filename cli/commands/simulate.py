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
    sp.add_argument(
        "--seed",
        type=int,
        nargs="+",
        default=None,
        help="the day's seed (the scenario's by default); several: one day each, tuned once",
    )
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
    from fleet.day import needs_tuning, run_day, tune
    from fleet.report import plot, seeds_table, table, write_json
    from fleet.scenario import SCENARIO_PATH, load_scenario

    scenario = load_scenario(args.scenario or SCENARIO_PATH, args.set)
    update = {}
    if args.quick:
        update["cities"] = 10
    if args.cities is not None:
        update["cities"] = args.cities
    scenario = scenario.model_copy(update=update)
    seeds = args.seed or [scenario.seed]
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    mdrp = args.mdrp or default_mdrp_dir()

    def progress(message: str) -> None:
        print(message, flush=True)

    tuned = tune(scenario, mdrp, progress) if needs_tuning(policies) else None
    results = []
    for seed in seeds:
        progress(f"seed {seed}:")
        day = scenario.model_copy(update={"seed": seed})
        results.append(run_day(day, mdrp, policies, progress=progress, tuned=tuned))
    args.out.mkdir(parents=True, exist_ok=True)
    text = "\n\n".join(table(r) for r in results)
    if len(results) > 1:
        text += "\n\n" + seeds_table(results)
    print(text)
    (args.out / "simulate.md").write_text(text + "\n")
    if plot(results[0], args.out / "simulate.png"):
        print(f"wrote {args.out / 'simulate.png'}")
    if args.json is not None:
        write_json(results[0] if len(results) == 1 else {"days": results}, args.json)
        print(f"wrote {args.json}")
    return 0
