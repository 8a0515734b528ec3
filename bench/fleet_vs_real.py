"""The fleet simulator held to a real small cluster: the same scenario run both ways.

    python bench/fleet_vs_real.py [--quick] [--runs N] [--real PATH] [--json PATH] [--out DIR]

Real: three simulated nodes (``ray.cluster_utils.Cluster``) with four EMULATED solver slots
(``actors.emulation``: a call sleeps a stated 100 ms off the CPU, one call at a time per
replica), ``orml``'s app with ``BusyRouter`` and the Busy autoscaler (1..4 replicas), dispatch
rounds over HTTP at 5 -> 16 -> 5 rounds/s (Poisson). Simulated: ``fleet.engine`` with the same
slots, policy objects, autoscaling delays and admission lane, offered each real run's own
arrivals (their times, the gaps between phases included), with that run's edge (HTTP,
ingress, hop; measured at light load, added to every simulated latency), its device time
per call (``timings_ms.device_ms`` of rounds sent one at a time) and its replicas' start
(STARTING to RUNNING in ``serve.status()``, the median).

Reports p50/p99 per phase, replicas over time and shed, both ways, per real run and the
medians over runs; the target is p99 within 20% (the fleet day's figures are believed as far
as this holds). ``--real`` re-simulates the real runs of an earlier ``--json`` (to try a
change to the simulation against the same measurements). Writes DIR/fleet_vs_real.png.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser
from scheduler import DISPATCH_LANE, SOLVER_CALL_MS, ClusterApp, _open, dispatch_bodies, run

from devices.catalog import gpu_types
from domain import TrafficClass
from fleet.engine import FleetSim, Policy, SimDeployment, SimSettings, Slot
from ops.loadgen import encode_request
from serve_app.config import AdmissionArgs

#: The Busy policy and Serve's wrapping, the same both ways.
TARGET_BUSY, BAND = 0.6, 0.1
AUTOSCALE = {"interval_s": 1.0, "upscale_delay_s": 2.0, "downscale_delay_s": 10.0}
LOOK_BACK_S = 3.0
#: How often Serve's controller calls the autoscaling policy: every control-loop iteration,
#: 0.1 s apart nominally (``RAY_SERVE_CONTROL_LOOP_INTERVAL_S``), ~0.32 s on the 2-core host
#: (the policy's calls in the controller's log); ``metrics_interval_s`` is how often replicas
#: push their Busy, not how often it is read.
CONTROL_LOOP_S = 0.3
IDLE_LEAD_S = 2 * LOOK_BACK_S
NODES = {"head": 1, "worker-1": 2, "worker-2": 1}  # solver slots per node


def phases(quick: bool) -> list[tuple[float, float]]:
    """(rounds/s, seconds) per phase. The rates keep Busy off the policy's thresholds (target
    0.6, down under 0.5): 5/s is 0.5 of a replica (one replica; from three, down to one),
    16/s 1.6 (three replicas at 0.53). At 6 and 18/s (0.6, 1.8 = 3 x 0.6) every decision sat
    on a threshold and the arrivals' noise, not the system, chose 1 or 2 replicas, 3 or 4."""
    return (
        [(5.0, 8.0), (16.0, 15.0), (5.0, 12.0)]
        if quick
        else [(5.0, 15.0), (16.0, 30.0), (5.0, 30.0)]
    )


def real_run(quick: bool) -> dict[str, Any]:
    from ray import serve

    app = ClusterApp([{"solver_slot": 2}, {"solver_slot": 1}], head={"solver_slot": 1})
    try:
        autoscaling = {
            "min_replicas": 1,
            "max_replicas": 4,
            "upscale_delay_s": AUTOSCALE["upscale_delay_s"],
            "downscale_delay_s": AUTOSCALE["downscale_delay_s"],
            "metrics_interval_s": AUTOSCALE["interval_s"],
            "look_back_period_s": LOOK_BACK_S,
            "policy": {
                "policy_function": "actors.autoscaling:BusyAutoscalingPolicy",
                "policy_kwargs": {"target_busy": TARGET_BUSY, "band": BAND},
            },
        }
        app.deploy(
            {"autoscaling_config": autoscaling, "max_ongoing_requests": 4},
            {"call_ms": SOLVER_CALL_MS},
        )
        from ops import local

        local.wait_ready(app.base, 180)
        bodies = dispatch_bodies(64, 300)
        requests = [encode_request(f"{app.base}/v1/dispatch", b) for b in bodies]
        # The edge: light load on one replica, latency above the emulated call.
        calib = run(_open(app.base, requests, 2.0, 6.0 if quick else 10.0))
        edge = [r.latency_s * 1e3 - SOLVER_CALL_MS for r in calib.ok()]
        edge_ms = statistics.median(edge)
        device_ms = device_call_ms(app.base, bodies[:PROBES])
        time.sleep(AUTOSCALE["downscale_delay_s"] + 2)  # back to one replica
        timeline: list[tuple[float, int]] = []
        stop = threading.Event()
        t0 = time.monotonic()  # the run's clock: the replicas' timeline and the arrivals
        t0_wall = time.time()  # the same instant in the controller's log

        starting: list[tuple[float, int]] = []

        def watch() -> None:
            while not stop.is_set():
                states = serve.status().applications["orml"].deployments["OrSolver"]
                now = time.monotonic() - t0
                timeline.append((now, states.replica_states.get("RUNNING", 0)))
                starting.append((now, states.replica_states.get("STARTING", 0)))
                stop.wait(0.25)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        runs, starts = [], []
        for rate, secs in phases(quick):
            # A phase starts once the last one's answers are in: there is a gap between them.
            starts.append(time.monotonic() - t0)
            runs.append(run(_open(app.base, requests, rate, secs)))
        stop.set()
        watcher.join(5)
    finally:
        app.close()
    sent = sorted(
        (start + r.sent_s, k, r.latency_s, r.status)
        for k, (start, got) in enumerate(zip(starts, runs, strict=True))
        for r in got.results
    )
    return {
        "edge_ms": edge_ms,
        "device_ms": device_ms,
        "t0_wall": t0_wall,
        "phases": [
            _phase([r.latency_s for r in got.ok()], len(got.results) - len(got.ok()))
            for got in runs
        ],
        "bounds": [(t, t + secs) for t, (_, secs) in zip(starts, phases(quick), strict=True)],
        # When each request was sent, on the run's clock, and its phase: the simulation is
        # offered the same arrivals (a Poisson draw of its own decides differently wherever
        # Busy sits near one of the autoscaler's thresholds).
        "arrivals": [(t, k) for t, k, _, _ in sent],
        "timeline": timeline,
        # (sent s, phase, latency s, status) of every request, for a look at the order served
        "requests": sent,
        "replica_start_s": replica_start_s(timeline, starting),
    }


def replica_start_s(running: list[tuple[float, int]], starting: list[tuple[float, int]]) -> float:
    """The median time a replica took from STARTING to RUNNING in a run (first in, first out;
    at the watcher's 0.25 s resolution). On the 2-core host it depends on the load: one
    replica in a quiet moment 1.9 s, three at once in a surge 3.9-5.5 s."""
    began: list[float] = []
    took: list[float] = []
    prev_run = prev_start = 0
    for (t, run_), (_, start) in zip(running, starting, strict=True):
        began += [t] * max(0, start + run_ - prev_start - prev_run)  # replicas added
        for _ in range(max(0, run_ - prev_run)):
            if began:
                took.append(t - began.pop(0))
        prev_run, prev_start = run_, start
    return statistics.median(took) if took else DEFAULT_REPLICA_START_S


#: A replica's start when a run saw none (one replica, quiet: Serve's log, 2026-11-24).
DEFAULT_REPLICA_START_S = 2.0


#: Rounds sent one at a time to read the real replicas' device time per call.
PROBES = 20


def device_call_ms(base: str, bodies: list[bytes]) -> float:
    """The median time a real call held its (emulated) device, from the answers'
    ``timings_ms.device_ms``, rounds sent one at a time: the stated call time plus what the
    host adds (the sleep's overshoot, the thread's wake-up), which the simulation must use to
    decide as the real autoscaler does (at 6 rounds/s x 100 ms Busy sits at its target)."""
    got = []
    for body in bodies:
        req = urllib.request.Request(
            f"{base}/v1/dispatch", body, {"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=30) as answer:
            got.append(json.loads(answer.read())["timings_ms"]["device_ms"])
    return statistics.median(got)


def sim_run(quick: bool, seed: int = 0, real: dict[str, Any] | None = None) -> dict[str, Any]:
    """The phases through ``fleet.engine``, calibrated by a real run (``real_run``'s result:
    its arrivals, edge, device time per call and replica start) or, without one, the stated
    call time, no edge and a Poisson draw of the phases (seeded)."""
    if real is None:
        real = {
            "edge_ms": 0.0,
            "device_ms": SOLVER_CALL_MS,
            "replica_start_s": DEFAULT_REPLICA_START_S,
            "arrivals": poisson_arrivals(quick, seed),
        }
    edge_ms, call_ms, arrivals = real["edge_ms"], real["device_ms"], real["arrivals"]
    gpu = gpu_types()["A10"]  # any type: the emulated call time is stated, not scaled
    slots = tuple(
        Slot("OrSolver", card, node, gpu, 1, 1.0)
        for card, node in enumerate(n for n, k in NODES.items() for _ in range(k))
    )
    settings = SimSettings(
        replica_start_s=real.get("replica_start_s", DEFAULT_REPLICA_START_S),
        busy_window_s=10.0,
        routing_stats_period_s=1.0,
        look_back_s=LOOK_BACK_S,
        jitter_sigma=0.0,
        record_requests=True,
        max_ongoing_requests=4,  # the real deployment's max_ongoing_requests
        # The real ingress's admission lane, run by the same LaneCore, and its deadline for a
        # request that names none.
        lanes=(("OrSolver", DISPATCH_LANE["max_in_flight"], DISPATCH_LANE["max_queued"]),),
        **{**AUTOSCALE, "interval_s": CONTROL_LOOP_S},
    )
    deadline_s = AdmissionArgs().default_timeout_s
    sim = FleetSim(
        [SimDeployment("OrSolver", "or_solver", 0.5, deadline_s, slots)],
        Policy("ours", target_busy=TARGET_BUSY, band=BAND),
        settings,
        lambda model, gpu, work: call_ms,
        lambda gpu: 1.0,
        seed=seed,
    )
    # The real replica has been idle before the phases (the calibration's scale-down): so is
    # the simulated one, its Busy window full of idle time, not of its first calls alone.
    out = sim.run(
        ((IDLE_LEAD_S + t, "OrSolver", TrafficClass.ONLINE, 1, 1.0, k) for t, k in arrivals),
        IDLE_LEAD_S + arrivals[-1][0] + deadline_s,
    )
    return {
        "phases": [
            _phase([lat + edge_ms / 1e3 for _, kind, lat in out.requests if kind == k], 0)
            for k in range(len(phases(quick)))
        ],
        "shed": sum(out.shed.values()),
        "timeline": [
            (ts - IDLE_LEAD_S, n["OrSolver"])
            for ts, n in out.running_timeline  # running, as the real side counts them
            if ts >= IDLE_LEAD_S
        ],
    }


def poisson_arrivals(quick: bool, seed: int) -> list[tuple[float, int]]:
    """(arrival s, phase) at the phases' rates, back to back (without the real run's gaps)."""
    rng = random.Random(seed)
    arrivals, t = [], 0.0
    for k, (rate, secs) in enumerate(phases(quick)):
        start = t
        while (t := t + rng.expovariate(rate)) < start + secs:
            arrivals.append((t, k))
        t = start + secs
    return arrivals


def _phase(latencies_s: list[float], errors: int) -> dict[str, Any]:
    lat = sorted(latencies_s)
    if not lat:
        return {"requests": 0, "p50_ms": None, "p99_ms": None, "errors": errors}
    return {
        "requests": len(lat),
        "p50_ms": round(lat[len(lat) // 2] * 1e3, 1),
        "p99_ms": round(lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3, 1),
        "errors": errors,
    }


def mean_replicas(timeline: list[tuple[float, int]], lo: float, hi: float) -> float:
    pts = [n for t, n in timeline if lo <= t < hi]
    return round(sum(pts) / len(pts), 2) if pts else float("nan")


#: Simulated runs per real run (seeds 0..N-1). Offered the real run's own arrivals, they differ
#: only in the simulation's tie-breaks; a fresh Poisson draw each (before) moved a surge's p99
#: 0.3-1.9 s between seeds: the draw decided whether the autoscaler crossed its threshold
#: before the surge.
SIM_SEEDS = 3


def compare(real: dict[str, Any], sims: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    """Per phase: real vs the simulations' median (p50, p99, replicas) and their p99 range."""
    rows = []
    for k, ((rate, secs), r) in enumerate(zip(phases(quick), real["phases"], strict=True)):
        lo, hi = real["bounds"][k]
        p50s = [s["phases"][k]["p50_ms"] for s in sims]
        p99s = [s["phases"][k]["p99_ms"] for s in sims]
        sim_p99 = round(statistics.median(p99s), 1)
        rows.append(
            {
                "phase": f"{rate:g} rounds/s, {secs:g} s",
                "real_p50_ms": r["p50_ms"],
                "sim_p50_ms": round(statistics.median(p50s), 1),
                "real_p99_ms": r["p99_ms"],
                "sim_p99_ms": sim_p99,
                "sim_p99_range_ms": [min(p99s), max(p99s)],
                "p99_sim_vs_real": round(sim_p99 / r["p99_ms"], 2) if r["p99_ms"] else None,
                "real_replicas": mean_replicas(real["timeline"], lo, hi),
                "sim_replicas": round(
                    statistics.median(mean_replicas(s["timeline"], lo, hi) for s in sims), 2
                ),
                "real_errors": r["errors"],
            }
        )
    return rows


def main() -> None:
    ap = parser(__doc__, "short phases (about 1.5 minutes a real run)")
    ap.add_argument("--runs", type=int, default=3, help="real runs, each simulated on its own")
    ap.add_argument(
        "--real",
        type=Path,
        help="take the real runs from this earlier --json instead of running the cluster "
        "(to try the simulation's model against the same measurements)",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.real:
        reals = json.loads(args.real.read_text())["real_runs"]
    else:
        reals = []
        for n in range(args.runs):
            log(f"real run {n + 1}/{args.runs}: three nodes, emulated solver, Busy 1..4 ...")
            reals.append(real_run(args.quick))
            got = reals[-1]
            log(
                f"  edge (HTTP, ingress, hop) p50 {got['edge_ms']:.1f} ms; a call holds the "
                f"device {got['device_ms']:.1f} ms (stated {SOLVER_CALL_MS:g}); a replica "
                f"starts in {got['replica_start_s']:.1f} s"
            )
    runs = []
    for real in reals:
        sims = [sim_run(args.quick, seed, real) for seed in range(SIM_SEEDS)]
        runs.append({"rows": compare(real, sims, args.quick), "sim_timeline": sims[0]["timeline"]})
    print(
        "\nEMULATED devices both ways; each real run's arrivals offered to the simulation, "
        "which adds that run's edge and uses its device time per call."
    )
    print(
        "| run | phase | p50 real / sim ms | p99 real / sim ms | p99 sim/real "
        "| replicas real / sim |"
    )
    print("|---|---|---|---|---|---|")
    for n, run_ in enumerate(runs, 1):
        for r in run_["rows"]:
            print(
                f"| {n} | {r['phase']} | {r['real_p50_ms']} / {r['sim_p50_ms']} | "
                f"{r['real_p99_ms']} / {r['sim_p99_ms']} | {r['p99_sim_vs_real']} | "
                f"{r['real_replicas']} / {r['sim_replicas']} |"
            )
    summary = summarise(runs)
    print("\nMedians over the runs:")
    print("| phase | p99 real / sim ms | p99 sim/real (range) |")
    print("|---|---|---|")
    for r in summary:
        lo, hi = r["ratio_range"]
        print(
            f"| {r['phase']} | {r['real_p99_ms']} / {r['sim_p99_ms']} | {r['p99_sim_vs_real']} "
            f"({lo}-{hi}) |"
        )
    print(f"shed: real {sum(p['errors'] for real in reals for p in real['phases'])}")
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "emulated": True,
        "summary": summary,
        "runs": runs,
        "real_timeline": reals[0]["timeline"],
        "sim_timeline": runs[0]["sim_timeline"],
        "real_runs": reals,
    }
    plot(result, args.out / "fleet_vs_real.png")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


def summarise(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per phase, over the real runs: the median real and simulated p99 and of their ratio."""
    out = []
    for k, row in enumerate(runs[0]["rows"]):
        ratios = [r["rows"][k]["p99_sim_vs_real"] for r in runs]
        out.append(
            {
                "phase": row["phase"],
                "real_p99_ms": statistics.median(r["rows"][k]["real_p99_ms"] for r in runs),
                "sim_p99_ms": statistics.median(r["rows"][k]["sim_p99_ms"] for r in runs),
                "p99_sim_vs_real": statistics.median(ratios),
                "ratio_range": [min(ratios), max(ratios)],
            }
        )
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    for key, label in (("real_timeline", "real cluster"), ("sim_timeline", "simulated")):
        pts = result[key]
        ax.step([t for t, _ in pts], [n for _, n in pts], where="post", label=label)
    ax.set_xlabel("seconds")
    ax.set_ylabel("solver replicas")
    ax.set_title("Replicas over the 1x -> 3x -> 1x step, real vs simulated (emulated devices)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    log(f"wrote {path}")


if __name__ == "__main__":
    main()
