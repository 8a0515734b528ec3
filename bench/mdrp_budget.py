"""Quality per compute on real delivery days: what more dispatch computation per round buys.

    python bench/mdrp_budget.py [--quick] [--json PATH] [--out DIR] [--data DIR] [--jobs N]
                                [--levels 3,8,9,10]

A fixed sample of MDRP days (the 16 seed-0 half-size days, where the clairvoyant optimum is
known: couriers short and plentiful, real and faster travel, both prep times) is replayed at
each compute level: the round planned under 1, 2, 5, 15 or every one of the weight variants
(``ReplayPolicy.plans``; ``planner.mdrp.replay.plan_variants``), two wall-clock budgets per
round (``round_budget_ms``) over every variant, and variants judged by rollouts of the next
5 (the policy's default), 10 or 20 minutes (``rollout_min``) instead of by one round's
pricing. Each level reports the dispatch time and the whole planning time actually spent per
round (means over the days; a rollout's planning is mostly the replay's own), click-to-door
and ready-to-pickup means, and the gap to the clairvoyant optimum. --quick: two days, three
levels (half a minute).

Writes DIR/mdrp_budget.csv, DIR/mdrp_budget.png and (--json) every row.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv
from mdrp import CLAIRVOYANT, ROOT, run_one

DAYS = tuple(CLAIRVOYANT)  # the 16 seed-0 half-size days: the optimum is known
ALL_VARIANTS = 45  # the plain plan plus planner.mdrp.replay.VARIANT_GRID
#: Each level's policy fields; rollout_min 0 where plans are priced by one round (the policy's
#: default rolls out 5 minutes: the last level).
LEVELS: tuple[dict[str, Any], ...] = (
    {"plans": 1, "rollout_min": 0},
    {"plans": 2, "rollout_min": 0},
    {"plans": 5, "rollout_min": 0},
    {"plans": 15, "rollout_min": 0},
    {"plans": ALL_VARIANTS, "rollout_min": 0},
    {"plans": ALL_VARIANTS, "round_budget_ms": 2.0, "rollout_min": 0},
    {"plans": ALL_VARIANTS, "round_budget_ms": 10.0, "rollout_min": 0},
    {"plans": 5, "rollout_min": 10},
    {"plans": 15, "rollout_min": 10},
    {"plans": 5, "rollout_min": 20},
    {"plans": 5, "rollout_min": 5},
)
QUICK_LEVELS = LEVELS[:1] + LEVELS[2:3] + LEVELS[4:5]


def label(level: dict[str, Any]) -> str:
    if "round_budget_ms" in level:
        return f"budget {level['round_budget_ms']:g} ms"
    plans = f"{level['plans']} plan{'s' if level['plans'] > 1 else ''}"
    if level.get("rollout_min"):
        return f"{plans}, rollouts {level['rollout_min']} min"
    return plans


def main() -> None:
    ap = parser(__doc__, "two days, three levels (half a minute)")
    default = ROOT.parent / "shared" / "data" / "mdrp"
    ap.add_argument("--data", type=Path, default=default)
    ap.add_argument("--jobs", type=int, default=2, help="days replayed at once")
    ap.add_argument(
        "--levels",
        default=None,
        help="comma-separated 1-based indices into LEVELS (default: all; the first given is "
        "the table's baseline), e.g. 3,8,9,10: 5 plans and the rollout levels",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    days = [args.data / d for d in (DAYS[:2] if args.quick else DAYS)]
    missing = [d.name for d in days if not (d / "orders.txt").exists()]
    if missing:
        sys.exit(f"mdrp_budget: days not found under {args.data}: {', '.join(missing)}")
    levels = QUICK_LEVELS if args.quick else LEVELS
    if args.levels:
        try:
            levels = tuple(LEVELS[int(k) - 1] for k in args.levels.split(","))
        except (ValueError, IndexError):
            sys.exit(f"mdrp_budget: --levels takes indices 1..{len(LEVELS)}, not {args.levels}")
    solutions = args.out / "mdrp_budget"
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        for k, level in enumerate(levels, 1):
            out = solutions / label(level).replace(" ", "_")
            days_rows = list(
                pool.map(run_one, map(str, days), [str(out)] * len(days), [level] * len(days))
            )
            infeasible = [r["instance"] for r in days_rows if not r["feasible"]]
            row = {
                "level": label(level),
                **level,
                "days": len(days_rows),
                "ms_per_round": statistics.fmean(r["ms_per_round"] for r in days_rows),
                "plan_ms_per_round": statistics.fmean(r["plan_ms_per_round"] for r in days_rows),
                "plans_per_round": statistics.fmean(r["plans"] / r["rounds"] for r in days_rows),
                "click_to_door_mean": statistics.fmean(r["click_to_door_mean"] for r in days_rows),
                "ready_to_pickup_mean": statistics.fmean(
                    r["ready_to_pickup_mean"] for r in days_rows
                ),
                "gap_to_optimum_pct": 100
                * statistics.fmean(
                    r["click_to_door_mean"] / CLAIRVOYANT[r["instance"]][1] - 1 for r in days_rows
                ),
                "infeasible": infeasible,
            }
            rows.append(row)
            log(
                f"  [{k}/{len(levels)}] {row['level']}: {row['plan_ms_per_round']:.1f} ms/round"
                f" (dispatch {row['ms_per_round']:.1f}), c2d "
                f"{row['click_to_door_mean']:.3f}, r2p {row['ready_to_pickup_mean']:.3f} "
                f"({time.perf_counter() - t0:.0f} s)"
            )
    report(rows)
    write_csv(args.out / "mdrp_budget.csv", rows)
    plot(rows, args.out / "mdrp_budget.png")
    if args.json:
        args.json.write_text(json.dumps({"days": [d.name for d in days], "levels": rows}, indent=2))
    log(f"wrote {args.out / 'mdrp_budget.csv'} and {args.out / 'mdrp_budget.png'}")


def report(rows: list[dict[str, Any]]) -> None:
    base = rows[0]
    print(
        "| compute per round | planning ms/round | x the first row | dispatch ms/round | dispatch "
        "calls/round | click-to-door mean | ready-to-pickup mean | vs clairvoyant optimum | "
        "feasible |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['level']} | {r['plan_ms_per_round']:.1f} | "
            f"{r['plan_ms_per_round'] / base['plan_ms_per_round']:.0f}x | "
            f"{r['ms_per_round']:.1f} | {r['plans_per_round']:.1f} | "
            f"{r['click_to_door_mean']:.3f} | {r['ready_to_pickup_mean']:.3f} | "
            f"+{r['gap_to_optimum_pct']:.2f}% | {r['infeasible'] or 'yes'} |"
        )


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    series = (
        (
            "plans per round",
            [r for r in rows if "round_budget_ms" not in r and not r.get("rollout_min")],
            "o-",
        ),
        ("wall-clock budget per round", [r for r in rows if "round_budget_ms" in r], "s--"),
        ("plans judged by rollouts", [r for r in rows if r.get("rollout_min")], "^:"),
    )
    for ax, key, name in (
        (a, "click_to_door_mean", "click-to-door mean, min"),
        (b, "ready_to_pickup_mean", "ready-to-pickup mean, min"),
    ):
        for (legend, part, style), below in zip(series, (False, False, True), strict=True):
            if not part:
                continue
            part = sorted(part, key=lambda r: r["plan_ms_per_round"])
            x = [r["plan_ms_per_round"] for r in part]
            ax.plot(x, [r[key] for r in part], style, label=legend)
            for k, (r, xi) in enumerate(zip(part, x, strict=True)):
                # Rollout levels sit close together: their labels go below, stepped apart.
                ax.annotate(
                    r["level"],
                    (xi, r[key]),
                    fontsize=7,
                    textcoords="offset points",
                    xytext=(3, -12 - 9 * k) if below else (3, 3),
                    arrowprops={"arrowstyle": "-", "lw": 0.4} if below else None,
                )
        mid = statistics.fmean(r[key] for r in rows)
        ax.set_ylim(mid - 0.5, mid + 0.5)  # a minute of range: what a policy change moves
        ax.set_xscale("log")
        ax.set_xlabel("planning time per round, ms (log)")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Quality per compute, {rows[0]['days']} MDRP days (2-core CPU)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
