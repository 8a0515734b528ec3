"""``orml plan``: place replicas on GPUs and write the Serve config."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``orml plan`` and its options to the command line's subcommands."""
    pl = sub.add_parser("plan", help="place replicas on GPUs and write the Serve config")
    pl.add_argument("--inventory", type=Path, required=True, help="cards per node (YAML)")
    pl.add_argument("--demand", type=Path, required=True, help="rate and p99 per model (YAML)")
    pl.add_argument("--profiles", type=Path, default=Path("profiles"))
    pl.add_argument("--base", type=Path, default=Path("deploy.yaml"), help="config to rewrite")
    pl.add_argument("--method", choices=["milp", "heuristic", "ffd", "one_per_gpu"], default="milp")
    pl.add_argument("--objective", choices=["cards", "cost"], default="cards")
    pl.add_argument("-o", "--out", type=Path, required=True, help="the Serve config to write")
    pl.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import yaml

    from devices.profiles import ProfileSet
    from fleet.placement_sim import simulate_placement
    from placement.emit import emit_config
    from placement.inventory import PlacementInputError, load_demand, load_inventory
    from placement.packer import PLANNERS, PlacementInfeasible

    try:
        inventory = load_inventory(args.inventory)
        demand = load_demand(args.demand)
        profiles = ProfileSet.load(args.profiles)
        planner = PLANNERS[args.method]
        kwargs = {} if args.method == "ffd" else {"objective": args.objective}
        plan = planner(inventory, demand, profiles, **kwargs)
        plan.check()
    except (PlacementInputError, PlacementInfeasible) as exc:
        print(f"orml plan: {exc}", file=sys.stderr)
        return 2
    sim = simulate_placement(plan, demand, profiles, duration_s=20.0)
    base = yaml.safe_load(args.base.read_text())
    args.out.write_text(
        f"# Written by `orml plan` ({plan.method}): {plan.cards_used()} cards, "
        f"${plan.cost_per_hour():.2f}/h, simulated SLO attainment {sim.attainment:.4f}\n"
        + yaml.safe_dump(emit_config(plan, base), sort_keys=False)
    )
    summary = {
        "method": plan.method,
        "cards": plan.cards_used(),
        "cost_per_hour": round(plan.cost_per_hour(), 2),
        "solve_s": round(plan.solve_s, 3),
        "optimal": plan.optimal,
        "notes": plan.notes,
        "simulated_attainment": {d: round(o.attainment, 4) for d, o in sim.deployments.items()},
        "replicas": [
            {
                "deployment": r.config.deployment,
                "card": str(plan.cards[r.card]),
                "share": r.config.share,
                "batch": r.config.batch,
                "memory_mb": round(r.config.memory_mb, 1),
                "p99_est_ms": round(r.config.p99_est_ms, 2),
            }
            for r in plan.replicas
        ],
    }
    json.dump(summary, sys.stdout, indent=2)
    print()
    return 0
