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
LABEL = "SIMULATED (call costs: the measured profiles in profiles/, other types derived)"


def table(result: dict[str, Any]) -> str:
    pols = result["policies"]
    names = [n for n in ORDER if n in pols] + [n for n in pols if n not in ORDER]
    ours = pols.get("ours")
    seen = "unseen by the tuning" if result["unseen"] else "a tuning seed (in sample)"
    lines = [
        LABEL,
        f"seed {result['seed']} ({seen}; tuned on seeds "
        f"{', '.join(map(str, result['tuned_on_seeds']))}), {result['cities']} cities, "
        f"{sum(result['requests'].values())} requests "
        f"({', '.join(f'{k} {v}' for k, v in result['requests'].items())})",
        sources_line(result["call_costs"]),
        "| policy | cost $ | vs ours | card-hours by type | online in SLO | queries p99 ms "
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
            f"| {n}{note} | {p['gpu_cost']:.0f} | {ratio} | {_hours_by_type(p)} "
            f"| {p['online_attainment']:.4f} | {_ms(p['by_kind']['query']['p99_ms'])} "
            f"| {_ms(p['by_kind']['round']['p99_ms'])} | {p['shed']} "
            f"| {p['offline_done']:.3f} | {plan} |"
        )
    if ours is not None and "best_single_type" in pols:
        lines.append(why_no_saving(ours, pols["best_single_type"]))
    return "\n".join(line for line in lines if line)


def why_no_saving(ours: dict[str, Any], single: dict[str, Any]) -> str:
    """A line saying why ours saves nothing against the best single type, where it does not:
    the tuning chose one type itself (no mix of types priced cheaper on the tuning days)."""
    types = {c["gpu_type"] for c in ours["plan"].values()}
    if ours["gpu_cost"] < single["gpu_cost"] or len(types) != 1:
        return ""
    return (
        f"ours is one type ({types.pop()}): on the tuning days no mix of types cost less than "
        "it at these call costs, so there is no saving to show against a single type"
    )


def sources_line(rows: list[dict[str, str]]) -> str:
    """Which call costs were measured and which derived, per model."""
    parts = []
    for model in sorted({r["model"] for r in rows}):
        measured = [r["type"] for r in rows if r["model"] == model and r["source"] != "derived"]
        derived = [r["type"] for r in rows if r["model"] == model and r["source"] == "derived"]
        parts.append(
            f"{model} measured on {', '.join(measured) or 'none'}"
            + (f", derived for {', '.join(derived)}" if derived else "")
        )
    return "call costs: " + "; ".join(parts)


def seeds_table(results: list[dict[str, Any]]) -> str:
    """Per day: ours against the best single type and Serve's defaults (cost, attainment)."""
    lines = [
        "| seed | ours $ | ours in SLO | best single type | its $ | its in SLO | saving "
        "| Serve's defaults $ | its in SLO |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        pols = r["policies"]
        ours, single = pols.get("ours"), pols.get("best_single_type")
        default = pols.get("serve_default")
        if ours is None or single is None:
            continue
        saving = 1 - ours["gpu_cost"] / single["gpu_cost"]
        seen = "" if r["unseen"] else " (tuned)"
        lines.append(
            f"| {r['seed']}{seen} | {ours['gpu_cost']:.0f} | {ours['online_attainment']:.4f} "
            f"| {single['note']} | {single['gpu_cost']:.0f} | {single['online_attainment']:.4f} "
            f"| {saving:.1%} | "
            + (
                f"{default['gpu_cost']:.0f} | {default['online_attainment']:.4f} |"
                if default
                else "- | - |"
            )
        )
    return "\n".join(lines)


def _ms(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2f}"


def _hours_by_type(policy: dict[str, Any]) -> str:
    return ", ".join(f"{t} {h:.1f}" for t, h in sorted(policy["gpu_hours_by_type"].items()))


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
    ax_cost.set_ylabel("fleet cost per hour, $")
    ax_cost.set_ylim(bottom=0)
    ax_cost.set_title(
        f"A fleet day (seed {result['seed']}), {result['cities']} cities: {LABEL}", fontsize=8
    )
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
