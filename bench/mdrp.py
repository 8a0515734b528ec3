"""Dispatch on real meal-delivery days: Grubhub's MDRP instances replayed through our dispatch.

    python bench/mdrp.py [--quick] [--json PATH] [--out DIR] [--data DIR] [--jobs N]
                         [--plans N] [--round-budget-ms MS]

Every instance folder under --data (default ../shared/data/mdrp, else the two in data/mdrp) is
replayed in process (``planner.mdrp.replay``, rounds every minute), its solution written in the
library's format to DIR/mdrp/NAME and scored by the independent evaluator
(``planner.mdrp.evaluate``). Reported beside the published results (Reyes et al. 2018, their
rolling-horizon heuristic: means over all 240 instances) and, on the 16 seed-0 half-size days,
the clairvoyant optimum. --quick: those 16 plus two full-size days (a balanced sample: every
level of every factor), a few minutes.

Writes DIR/mdrp.csv (one row per instance), DIR/mdrp.png and (--json) every row.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

ROOT = Path(__file__).resolve().parents[1]
METRICS = (
    "delivered_pct",
    "click_to_door_mean",
    "click_to_door_p90",
    "overage_mean",
    "ready_to_pickup_mean",
    "ready_to_pickup_p90",
    "utilisation",
    "cost_per_order",
    "orders_per_bundle",
)
#: Reyes et al. (2018), mean over the 240 instances (../shared/data/README.md).
PUBLISHED = {
    "delivered_pct": 99.75,
    "click_to_door_mean": 32.74,
    "click_to_door_p90": 49.3,
    "overage_mean": 2.77,
    "ready_to_pickup_mean": 1.93,
    "ready_to_pickup_p90": 6.04,
    "utilisation": 0.63,
    "cost_per_order": 11.42,
    "orders_per_bundle": 1.09,
}
#: Targets on the mean over the instances: (metric, bound, "<", "<=" or ">=").
TARGETS = (
    ("delivered_pct", 99.75, ">="),
    ("click_to_door_mean", 32.74, "<"),
    ("click_to_door_p90", 49.3, "<"),
    ("ready_to_pickup_mean", 1.93, "<"),
    ("cost_per_order", 11.42, "<="),
)
#: Click-to-door mean (min) on the seed-0 half-size days: published heuristic, clairvoyant optimum.
CLAIRVOYANT = {
    "0o50t100s1p100": (31.19, 29.81),
    "0o50t100s1p125": (34.67, 33.40),
    "0o50t100s2p100": (29.79, 28.96),
    "0o50t100s2p125": (34.18, 32.60),
    "0o50t75s1p100": (28.40, 27.49),
    "0o50t75s1p125": (31.62, 31.10),
    "0o50t75s2p100": (27.29, 26.83),
    "0o50t75s2p125": (31.19, 30.52),
    "0r50t100s1p100": (32.46, 30.76),
    "0r50t100s1p125": (36.75, 34.66),
    "0r50t100s2p100": (31.21, 29.93),
    "0r50t100s2p125": (35.60, 33.86),
    "0r50t75s1p100": (29.57, 28.47),
    "0r50t75s1p125": (33.71, 32.45),
    "0r50t75s2p100": (29.03, 27.95),
    "0r50t75s2p125": (33.41, 32.00),
}
NAME = re.compile(
    r"^(?P<seed>\d)(?P<size>o100|o50|r50)(?P<travel>t\d+)(?P<schedule>s\d)(?P<prep>p\d+)$"
)
FACTORS = ("size", "travel", "schedule", "prep")


def run_one(folder: str, out: str, policy: dict[str, Any] | None = None) -> dict[str, Any]:
    """Replay, write and score one day; ``policy``: ``ReplayPolicy`` fields to override."""
    from planner.mdrp import ReplayPolicy, evaluate, load_instance, replay, write_solution

    inst = load_instance(Path(folder))
    t0 = time.perf_counter()
    day = replay(inst, ReplayPolicy(**(policy or {})))
    seconds = time.perf_counter() - t0
    write_solution(inst, day, Path(out) / inst.name)
    ev = evaluate(Path(folder), Path(out) / inst.name)
    m = NAME.match(inst.name)
    return {
        "instance": inst.name,
        **(m.groupdict() if m else {}),
        "orders": len(inst.orders),
        "couriers": len(inst.couriers),
        "seconds": round(seconds, 2),
        "rounds": day.rounds,
        "plans": day.plans,
        "ms_per_round": round(day.dispatch_ms / max(1, day.rounds), 2),
        # The whole of each round's planning: every variant, its pricing or rollouts.
        "plan_ms_per_round": round(sum(day.plan_ms) / max(1, day.rounds), 2),
        "feasible": ev.feasible,
        "violations": len(ev.violations),
        **{k: round(getattr(ev.metrics, k), 4) for k in METRICS},
    }


def pick(data: Path, quick: bool) -> list[Path]:
    folders = sorted(p for p in data.iterdir() if (p / "orders.txt").exists())
    if quick:
        wanted = set(CLAIRVOYANT) | {"0o100t100s1p100", "1o100t75s2p125"}
        folders = [p for p in folders if p.name in wanted] or folders
    return folders


def main() -> None:
    ap = parser(__doc__, "the 16 seed-0 half-size days and two full-size ones (minutes)")
    default = ROOT.parent / "shared" / "data" / "mdrp"
    ap.add_argument(
        "--data", type=Path, default=default if default.is_dir() else ROOT / "data" / "mdrp"
    )
    ap.add_argument("--jobs", type=int, default=1, help="instances replayed at once")
    ap.add_argument("--plans", type=int, default=None, help="plans per round (ReplayPolicy)")
    ap.add_argument(
        "--round-budget-ms", type=float, default=None, help="wall-clock budget per round"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a ReplayPolicy field (JSON value), e.g. --set short_commit_min=5",
    )
    args = ap.parse_args()
    policy = {
        k: v
        for k, v in (("plans", args.plans), ("round_budget_ms", args.round_budget_ms))
        if v is not None
    }
    for item in args.set:
        key, _, value = item.partition("=")
        policy[key] = json.loads(value)
    args.out.mkdir(parents=True, exist_ok=True)
    folders = pick(args.data, args.quick)
    log(f"replaying {len(folders)} days from {args.data} ({args.jobs} at a time) ...")
    rows: list[dict[str, Any]] = []
    solutions = args.out / "mdrp"
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, str(f), str(solutions), policy) for f in folders]
        for k, fut in enumerate(futures, 1):
            row = fut.result()
            rows.append(row)
            log(
                f"  [{k}/{len(folders)}] {row['instance']}: {row['seconds']} s, c2d "
                f"{row['click_to_door_mean']:.2f}, r2p {row['ready_to_pickup_mean']:.2f}, "
                f"delivered {row['delivered_pct']:.2f}%, ${row['cost_per_order']:.2f}"
                f"{'' if row['feasible'] else ', INFEASIBLE'} ({time.perf_counter() - t0:.0f} s)"
            )
    result = summarize(rows)
    result["policy"] = policy
    report(result)
    write_csv(args.out / "mdrp.csv", rows)
    plot(result, args.out / "mdrp.png")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    log(f"wrote {args.out / 'mdrp.csv'} and {args.out / 'mdrp.png'}; solutions in {solutions}")


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.fmean(r[key] for r in rows)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    overall = {k: _mean(rows, k) for k in METRICS}
    by_factor = {
        f: {
            level: {k: _mean([r for r in rows if r.get(f) == level], k) for k in METRICS}
            | {"n": sum(r.get(f) == level for r in rows)}
            for level in sorted({r.get(f) for r in rows if r.get(f)})
        }
        for f in FACTORS
    }
    gaps = [
        {
            "instance": r["instance"],
            "ours": r["click_to_door_mean"],
            "published": CLAIRVOYANT[r["instance"]][0],
            "optimum": CLAIRVOYANT[r["instance"]][1],
        }
        for r in rows
        if r["instance"] in CLAIRVOYANT
    ]
    full = [r["seconds"] for r in rows if r.get("size") == "o100"]
    return {
        "date": time.strftime("%Y-%m-%d"),
        "instances": len(rows),
        "rows": rows,
        "overall": overall,
        "by_factor": by_factor,
        "clairvoyant": gaps,
        "o100_seconds_max": max(full) if full else None,
        "all_feasible": all(r["feasible"] for r in rows),
    }


def report(result: dict[str, Any]) -> None:
    o = result["overall"]
    n, feasible = result["instances"], result["all_feasible"]
    print(f"\n## MDRP replay: {n} instances (all feasible: {feasible})")
    print("| metric | ours (mean) | published heuristic (mean of 240) | target |")
    print("|---|---|---|---|")
    bounds = {m: (b, op) for m, b, op in TARGETS}
    for k in METRICS:
        target = ""
        if k in bounds:
            b, op = bounds[k]
            ok = {"<": o[k] < b, "<=": o[k] <= b, ">=": o[k] >= b}[op]
            target = f"{op} {b}: {'met' if ok else 'missed'}"
        print(f"| {k} | {o[k]:.3f} | {PUBLISHED[k]} | {target} |")
    for f, levels in result["by_factor"].items():
        print(f"\n### By {f}")
        print("| level | n | delivered % | c2d mean | c2d p90 | r2p mean | $/order | per bundle |")
        print("|---|---|---|---|---|---|---|---|")
        for level, m in levels.items():
            print(
                f"| {level} | {m['n']} | {m['delivered_pct']:.2f} | "
                f"{m['click_to_door_mean']:.2f} | {m['click_to_door_p90']:.1f} | "
                f"{m['ready_to_pickup_mean']:.2f} | "
                f"{m['cost_per_order']:.2f} | {m['orders_per_bundle']:.3f} |"
            )
    gaps = result["clairvoyant"]
    if gaps:
        print("\n### Seed-0 half-size days: click-to-door mean vs the clairvoyant optimum")
        print("| instance | ours | published heuristic | clairvoyant optimum | ours vs optimum |")
        print("|---|---|---|---|---|")
        for g in gaps:
            print(
                f"| {g['instance']} | {g['ours']:.2f} | {g['published']:.2f} | {g['optimum']:.2f} "
                f"| {100 * (g['ours'] / g['optimum'] - 1):+.1f}% |"
            )
        ours = statistics.fmean(100 * (g["ours"] / g["optimum"] - 1) for g in gaps)
        theirs = statistics.fmean(100 * (g["published"] / g["optimum"] - 1) for g in gaps)
        print(
            f"| **average of {len(gaps)}** | | | | **{ours:+.1f}%** (published {theirs:+.1f}%; "
            f"target <= +2%: {'met' if ours <= 2 else 'missed'}) |"
        )
    if result["o100_seconds_max"] is not None:
        s = result["o100_seconds_max"]
        verdict = "met" if s <= 60 else "missed"
        print(f"\nSlowest full-size (o100) day: {s:.1f} s (target <= 60 s: {verdict})")


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    keys = ("click_to_door_mean", "ready_to_pickup_mean", "cost_per_order")
    for ax, key in zip(axes[:2], keys[:2], strict=True):
        labels, values = [], []
        for levels in result["by_factor"].values():
            for level, m in levels.items():
                labels.append(level)
                values.append(m[key])
        ax.bar(range(len(values)), values, color="C0")
        ax.axhline(PUBLISHED[key], color="C3", ls="--", label="published mean (240)")
        ax.set_xticks(range(len(labels)), labels, rotation=45, fontsize=8)
        ax.set(title=f"{key} by factor level (ours)", ylabel="minutes")
        ax.legend(fontsize=7)
    ax = axes[2]
    gaps = result["clairvoyant"]
    if gaps:
        x = range(len(gaps))
        ax.plot(x, [g["optimum"] for g in gaps], "k.", label="clairvoyant optimum")
        ax.plot(x, [g["published"] for g in gaps], "C3x", label="published heuristic")
        ax.plot(x, [g["ours"] for g in gaps], "C0o", label="ours")
        ax.set_xticks(list(x), [g["instance"] for g in gaps], rotation=90, fontsize=6)
        ax.set(title="Seed-0 half-size days: click-to-door mean", ylabel="minutes")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
