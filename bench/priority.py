"""Priority down to the CPU: online dispatch beside a flood of real static solves.

    python bench/priority.py [--quick] [--seconds 20] [--blocks 3] [--rate 10] [--json PATH]
                             [--out DIR]

Starts the app as deploy.yaml runs it on the CPU (one solver replica, caches off) and sends
100-rider x 20-order dispatch rounds open-loop at ``--rate`` per second (new orders each), first
alone, then beside a closed-loop flood of static PDPTW solves (Li & Lim lc101, 2 s each, every
request a new seed, two at once: the ``solve`` lane widened to 4 so that its offline half
admits both), once per ``offline_solves``:

thread   the solve in the replica's worker thread (stepping aside between LNS steps and
         insertions): the behaviour before ``actors.offline_process``;
idle xN  the solves in N child processes of the replica at SCHED_IDLE (1 and 2);
nice x2  the same at nice 19.

Per case: online p50/p99 (ms) and its ratio to online alone on the same app, the two measured
in ``--blocks`` alternating blocks of ``--seconds`` each (the host's speed drifts over a run's
minutes; each condition's percentiles pool its blocks' rounds, and each block pair's own p99
ratio is listed to show the spread), errors; static solves answered (and
feasible); the offline work's CPU seconds (idle/nice: the child processes; thread: the solver
process's CPU beyond what it used in the online-alone run) and its share of the spare CPU
(offline CPU / (offline CPU + the box's idle CPU over the run, from /proc/stat)). Then, in this
process, the step-aside granularity: how long an online round can wait for the offline solve
to reach its next step-aside point in the thread policy (gaps between ``yield_to`` calls, the
construction included). Writes DIR/priority.csv, DIR/priority.png and (--json) everything.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import psutil
from common import log, parser, write_csv

from ops import local
from ops.loadgen import beside_flood, encode_request
from planner import generate_round
from planner.pdptw.instance import load_instance
from serve_app.config import DispatchAppArgs
from serve_app.schemas import DispatchRequest, SolveRequest

ROOT = Path(__file__).resolve().parents[1]
INSTANCE = ROOT / "data/pdptw/instances/lc101.txt"
SOLVE_LIMIT_S = 2.0
# (priority, child processes): thread is the behaviour before actors.offline_process
CASES = (("thread", 1), ("idle", 1), ("idle", 2), ("nice", 2))


def box_idle_s() -> float:
    """Idle CPU seconds of the whole box so far (all cores, /proc/stat's idle + iowait)."""
    t = psutil.cpu_times()
    return t.idle + getattr(t, "iowait", 0.0)


def solver_stats() -> dict[str, Any]:
    from ray import serve

    return serve.get_deployment_handle("OrSolver", "orml").stats.remote().result(timeout_s=30)


def wait_for_warm_kernels(timeout_s: float = 120.0) -> None:
    """The solver replica compiles its CPU kernels in the background after it starts: that
    CPU is not the online rounds' (or the flood's)."""
    from ray import serve

    handle = serve.get_deployment_handle("OrSolver", "orml")
    deadline = time.monotonic() + timeout_s
    while handle.ready.remote().result(timeout_s=30)["kernel_warming"]:
        if time.monotonic() > deadline:
            raise RuntimeError("the solver's kernels are still compiling")
        time.sleep(0.5)


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def run_block(
    base: str, online: list[bytes], flood: list[bytes], rate: float, seconds: float
) -> tuple[dict[str, Any], list[float]]:
    """One block of ``seconds``: its counters and the answered online rounds' latencies (s)."""
    stats = solver_stats()
    solver = psutil.Process(stats["pid"])
    children = [psutil.Process(pid) for pid in stats["offline_pids"]]
    idle0, solver0 = box_idle_s(), cpu_s(solver)
    child0 = sum(cpu_s(c) for c in children)
    got_online, got_flood = asyncio.run(beside_flood(base, online, rate, flood, 2, seconds))
    ok = got_online.ok()
    counters = {
        "online_sent": len(got_online.results),
        "online_errors": len(got_online.results) - len(ok),
        "solves_ok": len(got_flood.ok()) if got_flood else 0,
        "solves_other": (len(got_flood.results) - len(got_flood.ok())) if got_flood else 0,
        "solver_cpu_s": cpu_s(solver) - solver0,
        "child_cpu_s": sum(cpu_s(c) for c in children) - child0,
        "box_idle_s": box_idle_s() - idle0,
        "generator_cpu": got_online.cpu_share,
    }
    return counters, [r.latency_s for r in ok]


def pooled(case: str, blocks: list[tuple[dict[str, Any], list[float]]], seconds: float) -> dict:
    """One row for a condition's blocks: counters summed, percentiles over every block's
    latencies together, and each block's own p99 (ms) to show the spread."""
    latencies = [x for _, lat in blocks for x in lat]
    row: dict[str, Any] = {"case": case, "blocks": len(blocks)}
    for key in ("online_sent", "online_errors", "solves_ok", "solves_other"):
        row[key] = sum(c[key] for c, _ in blocks)
    for key in ("solver_cpu_s", "child_cpu_s", "box_idle_s"):
        row[key] = round(sum(c[key] for c, _ in blocks), 2)
    row["online_rps"] = round(len(latencies) / (seconds * len(blocks)), 1)
    row["online_p50_ms"] = round(float(np.percentile(latencies, 50)) * 1e3, 1)
    row["online_p99_ms"] = round(float(np.percentile(latencies, 99)) * 1e3, 1)
    row["block_p99_ms"] = [round(float(np.percentile(lat, 99)) * 1e3, 1) for _, lat in blocks]
    row["generator_cpu"] = round(max(c["generator_cpu"] for c, _ in blocks), 3)
    return row


def step_aside_gaps(seconds: float) -> dict[str, float]:
    """Gaps (ms) between a static solve's step-aside points, construction included."""
    from planner.pdptw.solve import solve

    instance = load_instance(INSTANCE)
    solve(instance, time_limit_s=0.2, seed=1)  # a replica's solves find the kernels loaded
    marks = [time.perf_counter()]

    def yield_to() -> float:
        marks.append(time.perf_counter())
        return 0.0

    solve(instance, time_limit_s=seconds, seed=0, yield_to=yield_to)
    marks.append(time.perf_counter())
    gaps = np.diff(marks) * 1e3
    return {
        "steps": len(gaps),
        "first_ms": round(float(gaps[0]), 1),
        "p50_ms": round(float(np.percentile(gaps, 50)), 2),
        "p99_ms": round(float(np.percentile(gaps, 99)), 2),
        "max_after_first_ms": round(float(gaps[1:].max()), 2) if len(gaps) > 1 else 0.0,
    }


def main() -> None:
    ap = parser(__doc__, "8 s per case, thread and idle only")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rate", type=float, default=10.0, help="online rounds per second")
    ap.add_argument(
        "--blocks", type=int, default=3, help="alone / beside-the-flood blocks per case"
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = 8.0 if args.quick else args.seconds
    blocks = 1 if args.quick else args.blocks
    cases = CASES[:3] if args.quick else CASES
    instance = load_instance(INSTANCE)
    rows: list[dict[str, Any]] = []
    with local.local_serve(num_cpus=4, namespace="bench-priority") as ep:
        base = ep.http
        online = [
            encode_request(
                f"{base}/v1/dispatch",
                DispatchRequest.from_domain(generate_round(100, 20, seed=1000 + k))
                .model_dump_json()
                .encode(),
            )
            for k in range(400)
        ]
        flood = [
            encode_request(
                f"{base}/v1/routes/solve",
                SolveRequest.from_instance(instance, time_limit_s=SOLVE_LIMIT_S, seed=k)
                .model_dump_json()
                .encode(),
            )
            for k in range(1, 400)
        ]
        for n, (policy, processes) in enumerate(cases):
            app_args = DispatchAppArgs(
                backend="numpy",
                etr_runtime="onnxruntime",
                cache={"enabled": False, "responses": False},
                offline_solves={"priority": policy, "processes": processes},
                # offline requests hold at most half a lane: 4 slots let the flood's 2 in
                admission={"solve": {"max_in_flight": 4, "max_queued": 16}},
            )
            local.run_app(app_args)
            local.wait_ready(base)
            wait_for_warm_kernels()
            asyncio.run(beside_flood(base, online, args.rate, flood[:4], 2, 3.0))  # warm both paths
            # Online alone and beside the flood in alternating blocks on the same app: the
            # host's speed drifts over the minutes a run takes, and one p99 of a few hundred
            # rounds is noisy, so each condition's percentiles pool its blocks.
            alone_blocks, flood_blocks = [], []
            for _ in range(blocks):
                alone_blocks.append(run_block(base, online, [], args.rate, seconds))
                flood_blocks.append(run_block(base, online, flood, args.rate, seconds))
            alone = pooled("online alone", alone_blocks, seconds)
            case = f"online + flood, {policy}" + (f" x{processes}" if policy != "thread" else "")
            row = pooled(case, flood_blocks, seconds)
            log(f"  {alone}\n  {row}")
            if n == 0:
                rows.append(alone)
            row["alone_p99_ms"], row["alone_solver_cpu_s"] = (
                alone["online_p99_ms"],
                alone["solver_cpu_s"],
            )
            row["block_p99_vs_alone"] = [
                round(f / a, 2)
                for f, a in zip(row["block_p99_ms"], alone["block_p99_ms"], strict=True)
            ]
            rows.append(row)
    for r in rows:
        alone_p99 = r.get("alone_p99_ms", r["online_p99_ms"])
        r["online_p99_vs_alone"] = round(r["online_p99_ms"] / alone_p99, 2)
        if "alone_p99_ms" not in r:
            continue
        offline = r["child_cpu_s"] or max(0.0, r["solver_cpu_s"] - r["alone_solver_cpu_s"])
        r["offline_cpu_s"] = round(offline, 2)
        r["offline_share_of_spare"] = round(offline / (offline + r["box_idle_s"]), 2)
    gaps = step_aside_gaps(SOLVE_LIMIT_S)
    write_csv(args.out / "priority.csv", rows)
    report(rows, gaps, args.rate, seconds)
    plot(rows, args.out / "priority.png")
    if args.json:
        args.json.write_text(json.dumps({"runs": rows, "step_aside_gaps": gaps}, indent=1))


def report(rows: list[dict[str, Any]], gaps: dict[str, float], rate: float, seconds: float) -> None:
    print(
        f"\nOnline 100 x 20 rounds at {rate:g}/s, blocks of {seconds:g} s; flood: lc101 solves, "
        f"{SOLVE_LIMIT_S:g} s each, 2 at once\n"
    )
    print(
        "| case | online p50 / p99 ms | alone, the blocks between: p99 ms | p99 vs alone | "
        "per block | online errors | solves ok | offline CPU s | of spare CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['online_p50_ms']} / {r['online_p99_ms']} | "
            f"{r.get('alone_p99_ms', '')} | {r['online_p99_vs_alone']}x | "
            f"{', '.join(f'{x}x' for x in r.get('block_p99_vs_alone', []))} | "
            f"{r['online_errors']} | "
            f"{r['solves_ok']} | "
            f"{r.get('offline_cpu_s', '')} | {r.get('offline_share_of_spare', '')} |"
        )
    print(
        f"\nStep-aside granularity (thread policy, lc101, one {SOLVE_LIMIT_S:g} s solve): "
        f"{gaps['steps']} steps; construction before the first step {gaps['first_ms']} ms; "
        f"then p50 {gaps['p50_ms']} ms, p99 {gaps['p99_ms']} ms, "
        f"max {gaps['max_after_first_ms']} ms"
    )


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4))
    names = [r["case"].replace("online + flood, ", "flood, ") for r in rows]
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r["online_p50_ms"] for r in rows], 0.4, label="online p50")
    ax.bar(x + 0.2, [r["online_p99_ms"] for r in rows], 0.4, label="online p99")
    ax.set_xticks(x, names)
    ax.set(ylabel="ms", title="Online dispatch beside real static solves, by offline priority")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
