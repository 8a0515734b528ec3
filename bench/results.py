"""The results page and the README's results table, rendered from the benches' JSON.

    python bench/results.py [--check]

Reads ``docs/results/sources.yaml`` (one entry per bench run kept: its JSON, the machine, the
command), renders each run as a table of figures against the baseline measured in the same
run, and writes ``docs/results.md`` and the README's block between ``<!-- results:begin -->``
and ``<!-- results:end -->``. ``--check`` writes nothing and exits 1 where either differs from
what the JSON gives (``tests/test_results_page.py`` runs it). Re-running a bench with
``--json`` and pointing its entry at the new file is how a figure changes: never by hand.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "docs" / "results" / "sources.yaml"
PAGE = ROOT / "docs" / "results.md"
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- results:begin -->\n).*?(<!-- results:end -->)", re.S)

#: (figure, measured, baseline, baseline's name, ratio) rows per bench, for the page.
Row = tuple[str, str, str, str, str]


def _ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 100 else f"{x:.1f} ms"


def kernels_rounds(data: dict[str, Any]) -> list[Row]:
    rows = []
    for r in data["round_certified_vs_dense"]:
        if not r["improve"]:
            continue
        rows.append(
            (
                f"dispatch_round {r['round'].replace('x', ' x ')} ({r['backend']}), improve on",
                _ms(r["certified_ms"]),
                _ms(r["dense_ms"]),
                "dense pass (every pair priced)",
                f"{r['speedup']:.2f}x faster; plan cost {r['plan_cost_ratio']:.4f}x, "
                f"assigned {r['assigned']}",
            )
        )
    return rows


def big_round(data: dict[str, Any]) -> list[Row]:
    m = data["medians"]
    return [
        (
            "5000 x 2000 round over HTTP (7.2 MiB JSON)",
            f"{m['http_s']:.2f} s",
            f"{m['in_process_s']:.2f} s",
            "the same plan in process",
            f"{data['ratio']:.2f}x",
        ),
        *(
            [
                (
                    "the same round over gRPC (the message built once)",
                    f"{m['grpc_s']:.2f} s",
                    f"{m['in_process_s']:.2f} s",
                    "the same plan in process",
                    f"{data['ratio_grpc']:.2f}x",
                )
            ]
            if "grpc_s" in m
            else []
        ),
        (
            "the same round without the ETR model in process",
            f"{m['http_s']:.2f} s",
            f"{m['in_process_no_etr_s']:.2f} s",
            "the round alone in process",
            f"{data['ratio_no_etr']:.2f}x",
        ),
        *_in_process_rows(data.get("body_to_arrays", {})),
        *_past_the_limits_rows(data.get("past_the_limits", {})),
    ]


def _past_the_limits_rows(refused: dict[str, float]) -> list[Row]:
    """A round one rider past the limit: the time to its 413, served and in process, against
    the model's 413 in process (how such a body was answered before the reader counted)."""
    rows: list[Row] = []
    for media, name in (("application/json", "JSON"), ("application/x-msgpack", "msgpack")):
        if f"{media}_reader_ms" not in refused:
            continue
        model = refused[f"{media}_model_ms"]
        for where, key in (("in process", "reader_ms"), ("served over HTTP", "http_ms")):
            got = refused[f"{media}_{key}"]
            rows.append(
                (
                    f"a {name} round one rider past the limit to its 413, {where}",
                    _ms(got),
                    _ms(model),
                    "the model's 413, in process",
                    f"{model / got:.1f}x faster",
                )
            )
    if "grpc_ms" in refused:
        rows.append(
            (
                "the same round over gRPC to its RESOURCE_EXHAUSTED",
                _ms(refused["grpc_ms"]),
                "",
                "",
                "",
            )
        )
    return rows


#: big_round's in-process comparisons: (figure, its key, the baseline's key, the baseline,
#: digits of the ms).
_IN_PROCESS = (
    (
        "its 7.2 MiB JSON body to the kernels' arrays, in process",
        "fast_ms",
        "model_ms",
        "the model's path (pydantic, domain types)",
        0,
    ),
    (
        "its JSON body to the kernels' arrays by the compiled reader, in process",
        "fast_ms",
        "structs_ms",
        "msgspec's wire Structs, the riders' columns gathered from them",
        0,
    ),
    (
        "its 2.6 MiB protobuf message to the kernels' arrays, in process",
        "message_fast_ms",
        "message_model_ms",
        "the model's path (parse, fields, pydantic, domain types)",
        0,
    ),
    (
        "its plan to the gRPC answer's bytes, in process",
        "answer_ms",
        "answer_dict_ms",
        "the message filled from the plan's dict",
        1,
    ),
    (
        "its plan to the JSON answer's bytes, in process",
        "answer_json_ms",
        "answer_json_dict_ms",
        "the plan's dict encoded (the same bytes)",
        1,
    ),
)


def _in_process_rows(times: dict[str, float]) -> list[Row]:
    """The rows of ``_IN_PROCESS`` that a run measured."""
    return [
        (
            figure,
            f"{times[mine]:.{digits}f} ms",
            f"{times[theirs]:.{digits}f} ms",
            baseline,
            f"{times[theirs] / times[mine]:.2f}x faster",
        )
        for figure, mine, theirs, baseline, digits in _IN_PROCESS
        if mine in times and theirs in times
    ]


def mdrp(data: dict[str, Any]) -> list[Row]:
    published = {
        "click_to_door_mean": ("click-to-door mean, min", 32.74),
        "click_to_door_p90": ("click-to-door p90, min", 49.3),
        "ready_to_pickup_mean": ("ready-to-pickup mean, min", 1.93),
        "cost_per_order": ("cost per order, $", 11.42),
        "delivered_pct": ("delivered, %", 99.75),
    }
    o = data["overall"]
    rows = [
        (
            f"{data['instances']} MDRP days: {label}",
            f"{o[key]:.2f}",
            f"{theirs:.2f}",
            "published heuristic (Reyes et al. 2018, mean of 240 days)",
            f"{o[key] / theirs:.3f}x",
        )
        for key, (label, theirs) in published.items()
    ]
    gaps = data.get("clairvoyant", [])
    if gaps:
        ours = sum(g["ours"] / g["optimum"] - 1 for g in gaps) / len(gaps) * 100
        theirs = sum(g["published"] / g["optimum"] - 1 for g in gaps) / len(gaps) * 100
        rows.append(
            (
                f"above the clairvoyant optimum ({len(gaps)} days)",
                f"+{ours:.1f}%",
                f"+{theirs:.1f}%",
                "published heuristic",
                "",
            )
        )
    return rows


def simulate(data: dict[str, Any]) -> list[Row]:
    """``orml simulate --json``: per day (seed), ours against the best single type and against
    Serve's defaults on ours's plan, cost of the day and online requests in SLO."""
    rows = []
    for day in data.get("days", [data]):
        pols = day["policies"]
        ours = pols["ours"]
        seen = "unseen" if day["unseen"] else "tuned on"
        head = f"fleet day, seed {day['seed']} ({seen}), {day['cities']} cities: ours"
        measured = f"${ours['gpu_cost']:.2f} at {ours['online_attainment']:.4f} in SLO"
        for name, what in (
            ("best_single_type", "best single type"),
            ("serve_default", "Serve's defaults, the same plan"),
        ):
            if name not in pols:
                continue
            other = pols[name]
            which = f" ({other['note'].removeprefix('single_')})" if other.get("note") else ""
            saving = 1 - ours["gpu_cost"] / other["gpu_cost"]
            rows.append(
                (
                    head,
                    measured,
                    f"${other['gpu_cost']:.2f} at {other['online_attainment']:.4f}",
                    what + which,
                    f"{abs(saving):.1%} {'less' if saving > 0 else 'more'}"
                    if abs(saving) >= 0.0005
                    else "the same cost",
                )
            )
    return rows


def kernels_insertion(data: dict[str, Any]) -> list[Row]:
    rows = []
    for r in data["insertion"]:
        if "cupy_s" not in r:
            continue
        rows.append(
            (
                f"insertion pricing {r['size'].replace('x', ' x ')} (CuPy)",
                _ms(r["cupy_s"] * 1e3),
                _ms(r["jit_s"] * 1e3),
                "compiled CPU twin, same machine",
                f"{r['cupy_vs_jit']:.0f}x",
            )
        )
    return rows


def first_request(data: dict[str, Any]) -> list[Row]:
    return [
        (
            f"first dispatch {r['round']} after /readyz (ingress peak +{r['first_peak_mb']} MB)",
            _ms(r["first_ms"]),
            _ms(r["later_median_ms"]),
            "median of the later requests",
            f"{r['ratio']:.2f}x",
        )
        for r in data["summary"]
    ]


def slow_and_dead(data: dict[str, Any]) -> list[Row]:
    what = {"/v1/dispatch": "300 x 100 rounds", "/v1/etr": "ETR calls (one order)"}
    base: dict[str, dict[str, Any]] = {}
    rows = []
    for r in data["scenes"]:
        path = r.get("path", "/v1/dispatch")
        if path not in base:
            base[path] = r
            continue
        solves = ""
        if "static_solves" in r:
            solves = f"; static solves {r['static_solves']}, {r['static_solves_failed']} failed"
        alone = base[path]
        rows.append(
            (
                f"{what[path]} {r['scene']}: p99 (within deadline {r['within_deadline']:.3f})",
                _ms(r["p99_ms"]),
                _ms(alone["p99_ms"]),
                f"the same {what[path].split(' (')[0]} alone",
                f"{r['p99_ms'] / alone['p99_ms']:.2f}x{solves}",
            )
        )
    return rows


def peer_triton(data: dict[str, Any]) -> list[Row]:
    ours, triton = data["summary"]["ours"], data["summary"]["triton"]
    rows = []
    for c, got in ours["by_concurrency"].items():
        peer = triton["by_concurrency"][c]
        rows.append(
            (
                f"/v1/etr requests/s at concurrency {c} (p99 {got['p99_ms']:.1f} ms)",
                f"{got['rps']:,.0f}/s",
                f"{peer['rps']:,.0f}/s (p99 {peer['p99_ms']:.1f} ms)",
                "Triton serving the same ONNX model",
                f"{got['rps'] / peer['rps']:.2f}x",
            )
        )
    return rows


def triton_clients(data: dict[str, Any]) -> list[Row]:
    table, base = data["summary"], "v1 HTTP (httpx)"
    rows = []
    for kind in ("v2 HTTP (tritonclient)", "v2 gRPC (tritonclient)"):
        for c, got in table[kind].items():
            ref = table[base][c]
            rows.append(
                (
                    f"ETR via {kind}, concurrency {c} (p50 / p99 {got['p50_ms']:.1f} / "
                    f"{got['p99_ms']:.1f} ms, {got['errors']} errors)",
                    f"{got['rps']:,.0f}/s",
                    f"{ref['rps']:,.0f}/s (p99 {ref['p99_ms']:.1f} ms)",
                    "the same order through /v1/etr (httpx)",
                    f"{got['rps'] / ref['rps']:.2f}x",
                )
            )
    return rows


RENDER: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "kernels_rounds": kernels_rounds,
    "big_round": big_round,
    "mdrp": mdrp,
    "simulate": simulate,
    "kernels_insertion": kernels_insertion,
    "first_request": first_request,
    "slow_and_dead": slow_and_dead,
    "peer_triton": peer_triton,
    "triton_clients": triton_clients,
}
#: The README's headline rows: (bench, row index).
HEADLINE = (
    ("kernels_rounds", 2),
    ("kernels_rounds", 1),
    ("big_round", 0),
    ("mdrp", 0),
    ("mdrp", 5),
    ("kernels_insertion", -1),
)


def _date(data: dict[str, Any], source: dict[str, Any]) -> str:
    meta = data.get("meta", {})
    if "date" in meta:
        return meta["date"]
    if "date" in data:
        return data["date"]
    found = re.search(r"20\d\d-\d\d-\d\d", source["json"])
    return found.group(0) if found else "?"


def render() -> tuple[str, str]:
    """(the results page, the README's block)."""
    sources = yaml.safe_load(SOURCES.read_text())
    page = [
        "# Results",
        "",
        "Rendered by `python bench/results.py` from the benches' JSON",
        "(`docs/results/sources.yaml`); each figure beside the baseline measured in the same",
        "run, with the machine, the date and the command. How each bench works:",
        "[Benchmarks](benchmarks.md).",
        "",
    ]
    rendered: dict[str, tuple[list[Row], dict[str, Any], str]] = {}
    for source in sources:
        data = json.loads((ROOT / source["json"]).read_text())
        rows = RENDER[source["bench"]](data)
        date = _date(data, source)
        rendered[source["bench"]] = (rows, source, date)
        page += [
            f"## {source['bench']}",
            "",
            f"{source['machine']}, {date}: `{source['command']}`",
            f"([JSON]({Path(source['json']).relative_to('docs').as_posix()}))",
            "",
            "| figure | measured | baseline | baseline is | ratio |",
            "|---|---|---|---|---|",
        ]
        page += ["| " + " | ".join(row) + " |" for row in rows]
        page.append("")
    block = [
        "| figure | measured | baseline (same run) | machine, date |",
        "|---|---|---|---|",
    ]
    for bench, k in HEADLINE:
        rows, source, date = rendered[bench]
        figure, measured, baseline, what, _ = rows[k]
        machine = source["machine"].split(",")[0]
        block.append(f"| {figure} | {measured} | {baseline}: {what} | {machine}, {date} |")
    return "\n".join(page).rstrip() + "\n", "\n".join(block) + "\n"


def main() -> int:
    page, block = render()
    readme = README.read_text()
    if not BLOCK.search(readme):
        raise SystemExit("README.md has no <!-- results:begin --> ... <!-- results:end --> block")
    new_readme = BLOCK.sub(lambda m: m.group(1) + block + m.group(2), readme)
    if "--check" in sys.argv:
        stale = [p for p, new in ((PAGE, page), (README, new_readme)) if p.read_text() != new]
        for path in stale:
            print(f"{path.relative_to(ROOT)} is not what the JSON gives: run bench/results.py")
        return 1 if stale else 0
    PAGE.write_text(page)
    README.write_text(new_readme)
    print(f"wrote {PAGE.relative_to(ROOT)} and the README's results block")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
