"""The fleet day as a table, a JSON file and a plot (cost and SLO attainment over the day)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The order policies are shown in; the first is the one the others are compared with.
ORDER = (
    "ours",
    "serve_default",
    "serve_default_equal_cost",
    "ffd",
    "best_single_type",
    "ours_peak_plan",
    "ours_day",
)
LABEL = "SIMULATED (call costs: fleet/scenario.yaml's estimate model, no GPU measured)"


def table(result: dict[str, Any]) -> str:
    pols = result["policies"]
    names = [n for n in ORDER if n in pols] + [n for n in pols if n not in ORDER]
    ours = pols.get("ours")
    lines = [
        LABEL,
        f"{result['cities']} cities, {sum(result['requests'].values())} requests "
        f"({', '.join(f'{k} {v}' for k, v in result['requests'].items())})",
        "| policy | GPU cost $ | vs ours | GPU-hours | online in SLO | queries p99 ms "
        "| rounds p99 ms | shed | offline done | plan at peak |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in names:
        p = pols[n]
        ratio = f"{p['gpu_cost'] / ours['gpu_cost']:.2f}x" if ours else "-"  # ours not run
        plan = ", ".join(
            f"{d} {c['replicas']}x{c['gpu_type']}@{c['share']:g}" for d, c in p["plan"].items()
        )
        note = f" ({p['note']})" if p.get("note") else ""
        lines.append(
            f"| {n}{note} | {p['gpu_cost']:.0f} | {ratio} | {p['gpu_hours']:.1f} "
            f"| {p['online_attainment']:.4f} | {p['by_kind']['query']['p99_ms']:.0f} "
            f"| {p['by_kind']['round']['p99_ms']:.0f} | {p['shed']} "
            f"| {p['offline_done']:.3f} | {plan} |"
        )
    return "\n".join(lines)


def write_json(result: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str))


def plot(result: dict[str, Any], path: Path) -> bool:
    """Cost per hour and online SLO attainment per hour, one line per policy. False when
    matplotlib is not installed."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pols = result["policies"]
    names = [n for n in ORDER if n in pols]
    fig, (ax_cost, ax_slo) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    for n in names:
        hours = pols[n]["hours"]
        x = [h["hour"] + 0.5 for h in hours]
        ax_cost.step(x, [h["gpu_cost"] for h in hours], where="mid", label=n)
        ax_slo.plot(x, [h["online_attainment"] for h in hours], marker=".", label=n)
    ax_cost.set_ylabel("GPU cost per hour, $")
    ax_cost.set_title(f"A fleet day, {result['cities']} cities: {LABEL}", fontsize=8)
    ax_cost.legend(fontsize=8)
    ax_slo.set_ylabel("online requests within SLO")
    ax_slo.set_xlabel("hour of the simulated day")
    ax_slo.axhline(0.99, color="grey", lw=0.8, ls="--")
    ax_slo.set_ylim(
        max(0.0, min(min(h["online_attainment"] for h in pols[n]["hours"]) for n in names) - 0.02),
        1.005,
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
