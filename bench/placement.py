"""Placement: our packer against first-fit-decreasing and one model per GPU, in one run.

    python bench/placement.py [--quick] [--json PATH] [--out DIR]

Inventory: the mix 4x T4, 4x A10, 2x A100-80GB, 1x H100 three times over (12/12/6/3 cards:
on 11 cards the baselines cannot fit 20 models at all), a synthetic zoo of 20 models
(``placement.synthetic``; flagged estimates, not measurements) and a sweep of demand mixes
(seeds x load scales, each planned for a 1.5x burst). For each mix and method: cards used,
cost per hour, simulated SLO attainment (request-weighted and worst model, Poisson and bursty
arrivals, 20 s simulated) and solve time; "infeasible" when the method cannot fit the demand
on the inventory. Then the solve time of the MILP for 20 models on 50 cards. Writes
DIR/placement.csv and DIR/placement.png.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from fleet.placement_sim import simulate_placement
from placement.packer import PLANNERS, PlacementInfeasible
from placement.synthetic import demand_mix, mixed_inventory, model_zoo

METHODS = ("milp", "heuristic", "ffd", "one_per_gpu")
N_MODELS = 20


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mixes = list(dict.fromkeys(r["mix"] for r in rows))
    fig, ax = plt.subplots(figsize=(10, 4))
    width = 0.8 / len(METHODS)
    for k, method in enumerate(METHODS):
        ys = []
        for mix in mixes:
            row = next(r for r in rows if r["mix"] == mix and r["method"] == method)
            ys.append(row["cards"] if row["cards"] is not None else 0)
        ax.bar([i + k * width for i in range(len(mixes))], ys, width, label=method)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(mixes))], mixes, rotation=30, fontsize=7)
    ax.set_ylabel("cards used (0 = infeasible on this inventory)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = parser(__doc__, "two mixes, 10 s simulated")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    inventory = mixed_inventory({"T4": 12, "A10": 12, "A100-80GB": 6, "H100": 3})
    zoo = model_zoo(N_MODELS, seed=7)
    seeds, scales = ([1, 2], [0.25]) if args.quick else ([1, 2, 3], [0.1, 0.25, 0.5])
    sim_s = 10.0 if args.quick else 20.0
    rows = []
    for seed in seeds:
        for scale in scales:
            demand = demand_mix(zoo, seed, scale, burst_factor=1.5)
            mix = f"seed{seed} x{scale}"
            log(f"mix {mix}: {sum(m.rate_rps for m in demand.models):.0f} requests/s in all")
            for method in METHODS:
                t0 = time.perf_counter()
                try:
                    plan = PLANNERS[method](inventory, demand, zoo)
                    plan.check()
                except PlacementInfeasible as exc:
                    rows.append({"mix": mix, "method": method, "cards": None, "note": str(exc)})
                    continue
                solve_s = time.perf_counter() - t0
                poisson = simulate_placement(plan, demand, zoo, duration_s=sim_s, seed=seed)
                bursty = simulate_placement(plan, demand, zoo, sim_s, arrivals="bursty", seed=seed)
                rows.append(
                    {
                        "mix": mix,
                        "method": method,
                        "cards": plan.cards_used(),
                        "cost_per_hour": round(plan.cost_per_hour(), 2),
                        "slo_poisson": round(poisson.attainment, 4),
                        "slo_bursty": round(bursty.attainment, 4),
                        "worst_model_bursty": round(bursty.worst_attainment, 4),
                        "solve_s": round(solve_s, 3),
                        "note": "; ".join(plan.notes),
                    }
                )
                log(f"  {method}: {rows[-1]}")

    big_inventory = mixed_inventory({"T4": 16, "L4": 12, "A10": 12, "A100-80GB": 6, "H100": 4})
    solve_times = []
    for seed in range(1 if args.quick else 3):
        demand = demand_mix(zoo, 100 + seed, 0.5, burst_factor=1.5)
        plan = PLANNERS["milp"](big_inventory, demand, zoo)
        solve_times.append(plan.solve_s)
        log(f"50 cards, 20 models: milp {plan.solve_s:.3f} s, optimal {plan.optimal}")

    write_csv(args.out / "placement.csv", rows)
    plot(rows, args.out / "placement.png")
    cols = [
        "mix",
        "method",
        "cards",
        "cost_per_hour",
        "slo_poisson",
        "slo_bursty",
        "worst_model_bursty",
        "solve_s",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        cells = [
            ("infeasible" if r.get(c) is None and c == "cards" else r.get(c, "-")) for c in cols
        ]
        print("| " + " | ".join("-" if v is None else str(v) for v in cells) + " |")
    saved = []
    for mix in dict.fromkeys(r["mix"] for r in rows):
        ours = next(r for r in rows if r["mix"] == mix and r["method"] == "milp")
        ffd = next(r for r in rows if r["mix"] == mix and r["method"] == "ffd")
        if ours["cards"] and ffd["cards"]:
            saved.append(1 - ours["cards"] / ffd["cards"])
    if saved:
        print(
            f"\nmilp vs FFD: median {statistics.median(saved):.0%} fewer cards over "
            f"{len(saved)} mixes where both fit (target >= 30%)"
        )
    print(
        f"milp solve, 20 models on 50 cards: median {statistics.median(solve_times):.3f} s "
        "(target <= 1 s)"
    )
    if args.json:
        import json

        args.json.write_text(json.dumps({"rows": rows, "solve_50_cards_s": solve_times}, indent=2))


if __name__ == "__main__":
    main()
