"""Overload: goodput and shed latency at 3x-10x the peak, arrivals open loop.

    python bench/overload.py [--quick] [--seconds 10] [--generator poisson|wrk|hey]
                             [--generator-nice replicas|19|0] [--no-proxy-shedding]
                             [--proxy-serve-defaults] [--proxy-queue-ms MS]
                             [--ingress-priority-steps N] [--ingress-replicas N]
                             [--clients plain|expect|both] [--cpu-control]
                             [--json PATH] [--out DIR]

Starts the app as deploy.yaml runs it on the CPU (one solver replica on this 2-core box) and
offers 100-rider x 20-order dispatch rounds: first closed-loop with ``hey`` (native) at
concurrency 4 and at the dispatch lane's capacity (the lane held full, nothing shed); the
better of the two is the unit of the offered rates. Then 3x, 6x and 10x that rate open loop,
each followed by another closed loop at concurrency 4: the host's speed drifts over minutes, so
each step's goodput is given both as a share of the run's best closed loop (the peak, the
stricter figure) and of the mean of the closed loops measured right before and right after it
(for the first step, the mean of the two initial ones). The overload steps' arrivals are
Poisson from ``ops.loadgen``, in a process of its own at the replicas' niceness (see
``poisson_run_at``; its CPU share, the rate it sent and how late it sent are reported);
near-Poisson from ``wrk`` (``--generator wrk``, native: the answers' latencies are not split
into shed and served); or with ``--generator hey`` ``hey -c C -q Q``, whose C workers tick in
step: every 1/Q s a burst of C requests arrives at once, the lane takes its capacity of each
burst and sheds the rest, and goodput is the lane's capacity x Q whatever the server could do
(measured: 12 x Q at every C and Q tried). ``--clients expect`` (or ``both``, each multiple
run twice in the same run) has the Poisson clients send ``Expect: 100-continue`` and their body
only once told to go on: the proxy refuses them on their headers while requests wait for the
lane, so a refused body never crosses (``ops.haproxy_config``).

``--cpu-control`` asks what the top multiple lost to the refused requests' CPU alone: after its
step, two more closed loops at concurrency 4, one beside spinning processes that take as much
CPU as that step's generator and edge did (at the generator's niceness), one beside the edge's
share only (the client on another machine, the server's own shedding left). Goodput under
overload against the first says whether shedding costs anything beyond that CPU; the second is
what the step would read with its clients elsewhere, estimated on this box.

Per rate: goodput (200s/s, and as a share of both peaks), the rate sent and the send lag, the
answers by status, the shed answers' p50/p99 (ms), the served rounds' p50/p99, all answers'
p50/p99, the edge's CPU (HAProxy and Serve's proxy actor, which parses HAProxy's log: cores,
and microseconds per answer), and whether every 503 carries Retry-After. Writes
DIR/overload.csv, DIR/overload.png and (--json) every run.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from common import log, parser, run_hey, write_csv

from ops import local
from ops.haproxy_config import QUEUE_MS, QUEUE_MS_ENV, SERVE_DEFAULTS_ENV
from ops.loadgen import HttpLoad, encode_request, run_load
from planner import generate_round
from serve_app.config import DispatchAppArgs
from serve_app.http.routes import lane_capacities
from serve_app.schemas import DispatchRequest

MULTIPLES = (3, 6, 10)


#: (latency s, HTTP status, send lag s: how late it left against its schedule, nan if unknown)
Answer = tuple[float, int, float]


def hey_csv(url: str, body_path: Path, args: list[str]) -> tuple[list[Answer], float]:
    """Every request of one ``hey`` run (hey does not say when it meant to send), and hey's
    CPU seconds."""
    out, cpu = run_hey(url, body_path, [*args, "-o", "csv"])
    rows = csv.DictReader(io.StringIO(out))
    return [(float(r["response-time"]), int(r["status-code"]), math.nan) for r in rows], cpu


def poisson_run(
    base: str, url: str, body: bytes, rate: float, seconds: float, seed: int, expect: bool
) -> tuple[list[Answer], float]:
    """Open-loop Poisson arrivals at ``rate`` for ``seconds`` (``ops.loadgen``): every
    request and the generator's CPU seconds. ``expect``: each request asks first (``Expect:
    100-continue``) and sends its body only when told to."""

    async def go() -> Any:
        gen = HttpLoad(base, max_connections=1024, timeout_s=30)
        headers = {"Expect": "100-continue"} if expect else None
        try:
            request = encode_request(url, body, headers=headers)
            return await gen.open_loop([request], rate, seconds, seed=seed)
        finally:
            await gen.close()

    run = run_load(go())
    return [(r.latency_s, r.status, r.lag_s) for r in run.results], run.cpu_share * run.wall_s


def _spin(duty: float, nice: int, stop: Any) -> None:
    """Busy ``duty`` of every 5 ms at niceness ``nice`` until ``stop`` is set."""
    import time

    os.nice(nice)
    period = 0.005
    while not stop.is_set():
        start = time.perf_counter()
        while time.perf_counter() - start < duty * period:
            pass
        time.sleep(max(0.0, period - (time.perf_counter() - start)))


class CpuBurn:
    """``cores`` of CPU taken at niceness ``nice`` while the block runs: one spinning
    process per core or part of one, each busy its share of every 5 ms."""

    def __init__(self, cores: float, nice: int) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self.stop = ctx.Event()
        n = max(1, math.ceil(cores - 1e-9))
        self.procs = [
            ctx.Process(target=_spin, args=(cores / n, nice, self.stop), daemon=True)
            for _ in range(n)
        ]

    def __enter__(self) -> CpuBurn:
        for proc in self.procs:
            proc.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for proc in self.procs:
            proc.join()


def replicas_niceness() -> int:
    """The niceness Ray runs the Serve replicas at (its ``worker_niceness``, 15 by default)."""
    import psutil

    for proc in psutil.process_iter(["cmdline", "nice"]):
        if "ServeReplica" in " ".join(proc.info["cmdline"] or ()):
            return int(proc.info["nice"])
    return 0


def poisson_run_at(nice: int, *args: Any) -> tuple[list[Answer], float]:
    """``poisson_run`` in a process of its own at niceness ``nice``. The generator stands for
    clients on other machines, but here it shares the server's two cores: at nice 0 it takes
    the CPU from replicas at nice 15 (a weight of 1024 against 36) whenever both want it; at
    their niceness it competes with them as an equal; either way its work is measured as the
    server's overload. At 19 (a weight of 15) it runs on what the server leaves; the send lag
    says whether that kept it on schedule."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=ctx, initializer=os.nice, initargs=(nice,)) as pool:
        return pool.submit(poisson_run, *args).result()


# wrk, for each of its connections: send, wait for the answer, think an exponential time,
# send again. With many connections each thinking far longer than an answer takes, arrivals
# are near Poisson, from a native generator. wrk keeps no per-request record: the script counts
# answers by status and wrk's own latency percentiles cover every answer.
WRK_SCRIPT = """
local f = io.open(os.getenv("ORML_WRK_BODY"), "rb"); local body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.body = body; wrk.headers["Content-Type"] = "application/json"
local think_ms = tonumber(os.getenv("ORML_WRK_THINK_MS"))
local threads = {}
function setup(thread) table.insert(threads, thread); thread:set("id", #threads) end
function init(args)
  math.randomseed(tonumber(os.getenv("ORML_WRK_SEED")) + wrk.thread:get("id"))
  counts = {}
end
function delay() return math.floor(-math.log(1 - math.random()) * think_ms) end
function response(status, headers, body) counts[status] = (counts[status] or 0) + 1 end
function done(summary, latency, requests)
  local all = {}
  for _, t in ipairs(threads) do
    for status, n in pairs(t:get("counts")) do all[status] = (all[status] or 0) + n end
  end
  for status, n in pairs(all) do io.write(string.format("status %d %d\\n", status, n)) end
  io.write(string.format("p50 %f\\np99 %f\\n", latency:percentile(50), latency:percentile(99)))
end
"""


def wrk_row(
    name: str,
    url: str,
    body_path: Path,
    rate: float,
    seconds: float,
    seed: int,
    out: Path,
    nice: int,
) -> dict:
    """``rate`` requests/s for ``seconds`` from ``wrk`` at niceness ``nice`` (native; see
    WRK_SCRIPT): one row as ``summarize`` writes it, with the latencies of all answers only
    (wrk does not split shed from served)."""
    script = out / "overload-wrk.lua"
    script.write_text(WRK_SCRIPT)
    connections = max(32, int(rate))  # each thinks ~1 s: far longer than any answer here
    env = {
        **os.environ,
        "ORML_WRK_BODY": str(body_path),
        "ORML_WRK_THINK_MS": f"{connections / rate * 1e3:.1f}",
        "ORML_WRK_SEED": str(seed),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrk = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "30s"]
    got = subprocess.run(
        ["nice", "-n", str(nice), *wrk, "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    statuses = {int(a): int(n) for a, n in re.findall(r"^status (\d+) (\d+)$", got, re.M)}
    errors = re.search(r"Socket errors: (.*)", got)
    ok, shed = statuses.get(200, 0), statuses.get(503, 0)
    answered = sum(statuses.values())
    p50, p99 = (float(re.search(rf"^{q} (\S+)$", got, re.M).group(1)) / 1e3 for q in ("p50", "p99"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "run": name,
        "offered_per_s": round(rate, 1),
        "sent_per_s": round(answered / seconds, 1),
        "send_lag_p99_ms": math.nan,
        "answered": answered,
        "ok": ok,
        "shed_503": shed,
        "other": answered - ok - shed,
        "socket_errors": errors.group(1).strip() if errors else "",
        "goodput_per_s": round(ok / seconds, 1),
        "all_p50_ms": round(p50, 1),
        "all_p99_ms": round(p99, 1),
        "served_p50_ms": math.nan,
        "served_p99_ms": math.nan,
        "shed_p50_ms": math.nan,
        "shed_p99_ms": math.nan,
        "generator_cpu_share": round(cpu / seconds, 2),
    }


def edge_cpu_s() -> float:
    """CPU seconds so far of the edge: every HAProxy process and Serve's proxy actor (which
    parses HAProxy's per-request log lines)."""
    import psutil

    total = 0.0
    for proc in psutil.process_iter(["name", "cmdline"]):
        name, cmd = proc.info["name"] or "", " ".join(proc.info["cmdline"] or ())
        if "haproxy" in name or "ProxyActor" in name or "ProxyActor" in cmd:
            try:
                cpu = proc.cpu_times()
            except psutil.Error:
                continue
            total += cpu.user + cpu.system
    return total


def with_edge_cpu(row: dict, edge_since_s: float, seconds: float) -> dict:
    """``row`` with the edge's CPU since ``edge_since_s`` (``edge_cpu_s``): its share of a
    core over the step and microseconds per answer."""
    edge = edge_cpu_s() - edge_since_s
    row["edge_cpu_share"] = round(edge / seconds, 2)
    row["edge_us_per_answer"] = round(edge * 1e6 / max(row["answered"], 1))
    return row


def retry_after_on_every_503(url: str, body: bytes, n: int) -> bool:
    """Send ``n`` requests at once; every 503 among the answers names Retry-After."""
    import asyncio

    import httpx

    async def go() -> bool:
        async with httpx.AsyncClient(timeout=30) as c:
            got = await asyncio.gather(
                *(
                    c.post(url, content=body, headers={"content-type": "application/json"})
                    for _ in range(n)
                )
            )
        shed = [r for r in got if r.status_code == 503]
        return all("retry-after" in r.headers for r in shed)

    return asyncio.run(go())


def summarize(name: str, offered: float, seconds: float, run: tuple[list[Answer], float]) -> dict:
    got, hey_cpu_s = run
    ok = [t for t, s, _ in got if s == 200]
    shed = [t for t, s, _ in got if s == 503]
    other = len(got) - len(ok) - len(shed)
    lags = [lag for _, _, lag in got if lag == lag]

    def pct(xs: list[float], p: float) -> float:
        return round(float(np.percentile(xs, p)) * 1e3, 1) if xs else float("nan")

    return {
        "run": name,
        "offered_per_s": round(offered, 1),
        "sent_per_s": round(len(got) / seconds, 1),
        "send_lag_p99_ms": pct(lags, 99),
        "answered": len(got),
        "ok": len(ok),
        "shed_503": len(shed),
        "other": other,
        "goodput_per_s": round(len(ok) / seconds, 1),
        "all_p50_ms": pct([t for t, _, _ in got], 50),
        "all_p99_ms": pct([t for t, _, _ in got], 99),
        "served_p50_ms": pct(ok, 50),
        "served_p99_ms": pct(ok, 99),
        "shed_p50_ms": pct(shed, 50),
        "shed_p99_ms": pct(shed, 99),
        "generator_cpu_share": round(hey_cpu_s / seconds, 2),
    }


def main() -> None:
    ap = parser(__doc__, "5 s steps, 3x and 10x only")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument(
        "--generator",
        choices=["poisson", "wrk", "hey"],
        default="poisson",
        help="the overload steps' arrivals: Poisson open loop (ops.loadgen); wrk (native, "
        "near-Poisson: one connection per request/s, each thinking an exponential ~1 s; "
        "shed and served latencies not split); or hey -q, whose workers send in step (a "
        "burst of every worker each 1/q s)",
    )
    ap.add_argument(
        "--generator-nice",
        choices=["19", "replicas", "0"],
        default="replicas",
        help="the overload generator's niceness: the replicas' (Ray's worker niceness, as "
        "since 2026-11-24); 19, below them, so it runs on the CPU the server leaves (the send "
        "lag says whether that kept it on schedule); or 0 (before: it outranks the server)",
    )
    ap.add_argument(
        "--no-proxy-shedding",
        action="store_true",
        help="the baseline: HAProxy lets every request through; only the ingress sheds",
    )
    ap.add_argument(
        "--proxy-serve-defaults",
        action="store_true",
        help="HAProxy as Serve starts it: four threads, 16 KiB buffers (a shed closes its "
        "connection), a log line per shed, Ray's niceness (before 2026-11-25; "
        "ops.haproxy_config)",
    )
    ap.add_argument(
        "--ingress-priority-steps",
        type=int,
        help="the Ingress replicas' niceness steps above the other replicas (the app's "
        "ingress_priority_steps; 0: Ray's niceness, the before of 2026-11-26)",
    )
    ap.add_argument(
        "--proxy-queue-ms",
        type=int,
        default=QUEUE_MS,
        help=f"how long a request past a lane's capacity waits in HAProxy's queue before its "
        f"503 (default {QUEUE_MS}; 15 before 2026-11-26)",
    )
    ap.add_argument("--ingress-replicas", type=int, default=1, help="Ingress replicas (processes)")
    ap.add_argument(
        "--cpu-control",
        action="store_true",
        help="after the top multiple, closed loops beside spinning processes taking that "
        "step's generator + edge CPU, then the edge's alone (see the module docstring)",
    )
    ap.add_argument(
        "--clients",
        choices=["plain", "expect", "both"],
        default="plain",
        help="the Poisson overload steps' clients: plain (each sends its body with its "
        "headers); expect (each sends Expect: 100-continue and its body only when told: the "
        "proxy refuses it on its headers while requests wait for the lane); both (each "
        "multiple run twice, plain then expect, in the same run)",
    )
    args = ap.parse_args()
    os.environ[QUEUE_MS_ENV] = str(args.proxy_queue_ms)  # read by the HAProxy wrapper
    if args.proxy_serve_defaults:  # read by the HAProxy wrapper Ray's workers run, and Serve
        os.environ.update({SERVE_DEFAULTS_ENV: "1", "RAY_SERVE_HAPROXY_NBTHREAD": "4"})
    args.out.mkdir(parents=True, exist_ok=True)
    seconds = 5.0 if args.quick else args.seconds
    multiples = (3, 10) if args.quick else MULTIPLES
    round_ = generate_round(100, 20, seed=5)
    body = DispatchRequest.from_domain(round_).model_dump_json().encode()
    body_path = args.out / "overload-body.json"
    body_path.write_bytes(body)
    rows = []
    steps = (
        {}
        if args.ingress_priority_steps is None
        else {"ingress_priority_steps": args.ingress_priority_steps}
    )
    app_args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", **steps)
    lanes = lane_capacities(app_args.admission) if not args.no_proxy_shedding else None
    with local.local_serve(num_cpus=4, namespace="bench-overload", haproxy_lanes=lanes) as ep:
        local.run_app(app_args, {"Ingress": {"num_replicas": args.ingress_replicas}})
        local.wait_ready(ep.http)
        url = f"{ep.http}/v1/dispatch"
        hey_csv(url, body_path, ["-z", "3s", "-c", "4"])  # warm

        def closed_loop(name: str, concurrency: int, burn: float = 0.0) -> dict:
            edge = edge_cpu_s()
            with CpuBurn(burn, nice) if burn else contextlib.nullcontext():
                run = hey_csv(url, body_path, ["-z", f"{seconds}s", "-c", str(concurrency)])
            row = with_edge_cpu(summarize(name, math.nan, seconds, run), edge, seconds)
            row["burn_cores"] = round(burn, 2)
            rows.append(row)
            return row

        replicas = args.generator_nice == "replicas"
        nice = replicas_niceness() if replicas else int(args.generator_nice)
        closed_loop("closed loop, c=4", 4)
        # The lane full but nothing shed: what holding max_queued requests costs by itself.
        capacity = lane_capacities(app_args.admission)["/v1/dispatch"]
        closed_loop(f"closed loop, c={capacity} (lane full)", capacity)
        # The peak right before an overload step: for the first, the mean of the two closed
        # loops; then the closed loop measured right after the step before it.
        before = sum(r["goodput_per_s"] for r in rows) / len(rows)
        offered_peak = max(r["goodput_per_s"] for r in rows)  # the multiples' unit
        kinds = {"plain": (False,), "expect": (True,), "both": (False, True)}[args.clients]
        for k, expect in ((k, e) for k in multiples for e in kinds):
            rate = k * offered_peak
            name = f"{k}x, Expect" if expect else f"{k}x"
            edge = edge_cpu_s()
            if expect and args.generator != "poisson":
                raise SystemExit("--clients expect/both needs the Poisson generator")
            if args.generator == "wrk":
                row = wrk_row(name, url, body_path, rate, seconds, k, args.out, nice)
                with_edge_cpu(row, edge, seconds)
            else:
                if args.generator == "hey":
                    # each worker ~4 requests/s at most: enough workers to hold the rate while
                    # the admitted ones wait for their round. hey's workers tick in step: bursts.
                    workers = max(8, int(rate / 4))
                    got = hey_csv(
                        url,
                        body_path,
                        ["-z", f"{seconds}s", "-c", str(workers), "-q", f"{rate / workers:.2f}"],
                    )
                else:
                    got = poisson_run_at(nice, ep.http, url, body, rate, seconds, k, expect)
                row = with_edge_cpu(summarize(name, rate, seconds, got), edge, seconds)
            rows.append(row)
            # The host's own speed drifts over minutes: each step is also held to the peak
            # measured on either side of it (alternating, as the peers' benches do).
            after = closed_loop(f"closed loop, c=4, after {name}", 4)["goodput_per_s"]
            row["local_peak_per_s"] = round((before + after) / 2, 1)
            row["goodput_of_local_peak"] = round(row["goodput_per_s"] / row["local_peak_per_s"], 2)
            before = after
            log(f"  {name} ({rate:.0f}/s offered, {args.generator}): {row}")
        if args.cpu_control:
            top = rows[-2]  # the last overload step (the closed loop after it follows)
            taken = top["generator_cpu_share"] + top["edge_cpu_share"]
            same = closed_loop(f"closed loop, c=4, beside {taken:.2f} cores spinning", 4, taken)
            top["goodput_of_same_cpu"] = round(top["goodput_per_s"] / same["goodput_per_s"], 2)
            edge_only = top["edge_cpu_share"]
            closed_loop(f"closed loop, c=4, beside {edge_only:.2f} cores spinning", 4, edge_only)
        # The peak is the best closed loop of the run: goodput under overload is held to the
        # most the app answered without shedding, not to the lower of noisy figures.
        peak = max(
            r["goodput_per_s"]
            for r in rows
            if r["offered_per_s"] != r["offered_per_s"] and not r["burn_cores"]
        )
        for row in rows:
            row["goodput_of_peak"] = round(row["goodput_per_s"] / peak, 2)
        retry_after = retry_after_on_every_503(url, body, 200)
    write_csv(args.out / "overload.csv", rows)
    print(
        "| offered | sent/s (send lag p99 ms) | rounds/s answered 200 | of peak | of the peaks "
        "either side | 503 | other | shed p50 / p99 ms | served p50 / p99 ms | all p50 / p99 ms "
        "| generator CPU | edge CPU (us/answer) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        either_side = r.get("goodput_of_local_peak", "")
        print(
            f"| {r['run']} ({r['offered_per_s']}/s) | {r['sent_per_s']} ({r['send_lag_p99_ms']}) "
            f"| {r['goodput_per_s']} | {r['goodput_of_peak']} | {either_side} | {r['shed_503']} | "
            f"{r['other']} | "
            f"{r['shed_p50_ms']} / {r['shed_p99_ms']} | {r['served_p50_ms']} / "
            f"{r['served_p99_ms']} | {r['all_p50_ms']} / {r['all_p99_ms']} | "
            f"{r['generator_cpu_share']} | {r['edge_cpu_share']} ({r['edge_us_per_answer']}) |"
        )
    print(f"\nevery 503 carries Retry-After (200 requests at once): {retry_after}")
    for r in rows:
        if "goodput_of_same_cpu" in r:
            print(
                f"{r['run']}: goodput {r['goodput_of_same_cpu']} of a closed loop beside the "
                "same CPU taken by spinning processes"
            )
    if args.generator != "hey":
        print(f"overload steps' generator: {args.generator} at niceness {args.generator_nice}")
    print("HAProxy: " + ("Serve's defaults" if args.proxy_serve_defaults else "ops.haproxy_config"))
    print(f"HAProxy's lane queue: {args.proxy_queue_ms} ms")
    print(f"Ingress replicas: {app_args.ingress_priority_steps} niceness steps above the others")
    plot(rows, args.out / "overload.png")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "runs": rows,
                    "retry_after_on_503": retry_after,
                    "proxy_queue_ms": args.proxy_queue_ms,
                },
                indent=1,
            )
        )


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    overload = [r for r in rows if r["offered_per_s"] == r["offered_per_s"]]  # no closed loops
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for kind, runs in (
        ("", [r for r in overload if "Expect" not in r["run"]]),
        (", Expect: 100-continue", [r for r in overload if "Expect" in r["run"]]),
    ):
        if not runs:
            continue
        x = [r["offered_per_s"] for r in runs]
        a.plot(x, [r["goodput_per_s"] for r in runs], "o-", label=f"goodput (200/s){kind}")
        b.plot(x, [r["shed_p99_ms"] for r in runs], "o-", label=f"shed p99{kind}")
        b.plot(x, [r["served_p99_ms"] for r in runs], "o-", label=f"served p99{kind}")
    peak = max(r["goodput_per_s"] for r in rows)
    a.axhline(peak, color="grey", ls="--", lw=0.8, label="peak")
    a.set(xlabel="offered rounds/s", ylabel="rounds/s")
    a.legend(fontsize=7)
    b.set(xlabel="offered rounds/s", ylabel="ms", yscale="log")
    b.legend(fontsize=7)
    fig.suptitle("Dispatch under overload (hey): goodput and answer latency")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
