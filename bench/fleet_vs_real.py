"""The fleet simulator held to a real small cluster: the same scenario run both ways.

    python bench/fleet_vs_real.py [--quick] [--json PATH] [--out DIR]

Real: three simulated nodes (``ray.cluster_utils.Cluster``) with four EMULATED solver slots
(``actors.emulation``: a call sleeps a stated 100 ms off the CPU, one call at a time per
replica), ``orml``'s app with ``BusyRouter`` and the Busy autoscaler (1..4 replicas), dispatch
rounds over HTTP at 6 -> 18 -> 6 rounds/s (Poisson). Simulated: ``fleet.engine`` with the same
slots, call time, policy objects, autoscaling delays and arrival rates. The real path's edge
(HTTP, ingress, the hop) is measured first at light load and added to every simulated latency.

Reports p50/p99 per phase, replicas over time and shed, both ways (the simulation over
``SIM_SEEDS`` seeds: medians, and the p99's range); the target is p99 within 20% (the fleet
day's figures are believed as far as this holds). Writes DIR/fleet_vs_real.png.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser
from scheduler import DISPATCH_LANE, SOLVER_CALL_MS, ClusterApp, _open, dispatch_bodies, run

from devices.catalog import gpu_types
from domain import TrafficClass
from fleet.engine import FleetSim, Policy, Settings, SimDeployment, Slot
from ops.loadgen import encode_request
from serve_app.config import AdmissionArgs

#: The Busy policy and Serve's wrapping, the same both ways.
TARGET_BUSY, BAND = 0.6, 0.1
AUTOSCALE = {"interval_s": 1.0, "upscale_delay_s": 2.0, "downscale_delay_s": 10.0}
LOOK_BACK_S = 3.0
NODES = {"head": 1, "worker-1": 2, "worker-2": 1}  # solver slots per node


def phases(quick: bool) -> list[tuple[float, float]]:
    """(rounds/s, seconds) per phase."""
    return (
        [(6.0, 8.0), (18.0, 15.0), (6.0, 12.0)]
        if quick
        else [(6.0, 15.0), (18.0, 30.0), (6.0, 30.0)]
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
        requests = [encode_request(f"{app.base}/v1/dispatch", b) for b in dispatch_bodies(64, 300)]
        # The edge: light load on one replica, latency above the emulated call.
        calib = run(_open(app.base, requests, 2.0, 6.0 if quick else 10.0))
        edge = [r.latency_s * 1e3 - SOLVER_CALL_MS for r in calib.ok()]
        edge_ms = statistics.median(edge)
        time.sleep(AUTOSCALE["downscale_delay_s"] + 2)  # back to one replica
        timeline: list[tuple[float, int]] = []
        stop = threading.Event()

        def watch() -> None:
            t0 = time.monotonic()
            while not stop.is_set():
                status = serve.status().applications["orml"].deployments["OrSolver"]
                timeline.append((time.monotonic() - t0, status.replica_states.get("RUNNING", 0)))
                stop.wait(0.5)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        runs = [run(_open(app.base, requests, rate, secs)) for rate, secs in phases(quick)]
        stop.set()
        watcher.join(5)
    finally:
        app.close()
    return {
        "edge_ms": edge_ms,
        "phases": [
            _phase([r.latency_s for r in got.ok()], len(got.results) - len(got.ok()))
            for got in runs
        ],
        "timeline": timeline,
    }


def sim_run(quick: bool, edge_ms: float, seed: int = 0) -> dict[str, Any]:
    gpu = gpu_types()["A10"]  # any type: the emulated call time is stated, not scaled
    slots = tuple(
        Slot("OrSolver", card, node, gpu, 1, 1.0)
        for card, node in enumerate(n for n, k in NODES.items() for _ in range(k))
    )
    settings = Settings(
        replica_start_s=2.0,
        busy_window_s=10.0,
        routing_stats_period_s=1.0,
        look_back_s=LOOK_BACK_S,
        jitter_sigma=0.0,
        record_requests=True,
        max_ongoing_requests=4,  # the real deployment's max_ongoing_requests
        # The real ingress's admission lane, run by the same LaneCore, and its deadline for a
        # request that names none.
        lanes=(("OrSolver", DISPATCH_LANE["max_in_flight"], DISPATCH_LANE["max_queued"]),),
        **AUTOSCALE,
    )
    deadline_s = AdmissionArgs().default_timeout_s
    sim = FleetSim(
        [SimDeployment("OrSolver", "or_solver", 0.5, deadline_s, slots)],
        Policy("ours", target_busy=TARGET_BUSY, band=BAND),
        settings,
        lambda model, gpu, work: SOLVER_CALL_MS,
        lambda gpu: 1.0,
        seed=seed,
    )
    rng = random.Random(seed)
    arrivals, t, bounds = [], 0.0, []
    for rate, secs in phases(quick):
        start = t
        while (t := t + rng.expovariate(rate)) < start + secs:
            arrivals.append((t, "OrSolver", TrafficClass.ONLINE, 1, 1.0, 0))
        t = start + secs
        bounds.append((start, t))
    out = sim.run(iter(arrivals), t)
    shed_total = sum(out.shed.values())
    return {
        "phases": [
            _phase([lat + edge_ms / 1e3 for a, _, lat in out.requests if lo <= a < hi], 0)
            for lo, hi in bounds
        ],
        "shed": shed_total,
        "timeline": [(ts, n["OrSolver"]) for ts, n in out.replicas_timeline],
    }


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


#: Simulated runs per comparison (seeds 0..N-1): one run's p99 over a phase of seconds hangs
#: on whether the autoscaler crossed its threshold just before the surge, so a single seed's
#: p99 moved 0.3-1.9 s in the surge with everything else equal.
SIM_SEEDS = 5


def compare(real: dict[str, Any], sims: list[dict[str, Any]], quick: bool) -> list[dict[str, Any]]:
    """Per phase: real vs the simulations' median (p50, p99, replicas) and their p99 range."""
    rows, t = [], 0.0
    for k, ((rate, secs), r) in enumerate(zip(phases(quick), real["phases"], strict=True)):
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
                "real_replicas": mean_replicas(real["timeline"], t, t + secs),
                "sim_replicas": round(
                    statistics.median(mean_replicas(s["timeline"], t, t + secs) for s in sims), 2
                ),
                "real_errors": r["errors"],
            }
        )
        t += secs
    return rows


def main() -> None:
    ap = parser(__doc__, "short phases (about 2 minutes in all)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log("real: three nodes, emulated 100 ms solver, Busy autoscaling 1..4 ...")
    real = real_run(args.quick)
    log(f"  edge (HTTP, ingress, hop) p50 {real['edge_ms']:.1f} ms")
    sims = [sim_run(args.quick, real["edge_ms"], seed=seed) for seed in range(SIM_SEEDS)]
    sim = sims[0]
    rows = compare(real, sims, args.quick)
    print("\nEMULATED devices both ways (100 ms solver calls); the simulation adds the real edge;")
    print(f"simulated figures are medians over {SIM_SEEDS} seeds (p99's range beside).")
    print(
        "| phase | p50 real / sim ms | p99 real / sim ms (sim range) | p99 sim/real "
        "| replicas real / sim |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        lo, hi = r["sim_p99_range_ms"]
        print(
            f"| {r['phase']} | {r['real_p50_ms']} / {r['sim_p50_ms']} | {r['real_p99_ms']} / "
            f"{r['sim_p99_ms']} ({lo}-{hi}) | {r['p99_sim_vs_real']} | {r['real_replicas']} / "
            f"{r['sim_replicas']} |"
        )
    shed = [s["shed"] for s in sims]
    print(f"shed: real {sum(p['errors'] for p in real['phases'])}, simulated {shed}")
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "emulated": True,
        "edge_ms": real["edge_ms"],
        "rows": rows,
        "real_timeline": real["timeline"],
        "sim_timeline": sim["timeline"],
    }
    plot(result, args.out / "fleet_vs_real.png")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


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
