"""The scheduler at cluster scale: traffic classes, routing, autoscaling. EMULATED devices.

    python bench/scheduler.py [--quick] [--json PATH] [--out DIR] [--only SECTION ...]

Every device here is emulated (``etr.runtime_emulated``, ``actors.emulation``): a call computes
its real answer on the CPU, then sleeps off the CPU until a stated call time has passed, one
call at a time per device. The figures are therefore those of the scheduling, not of any GPU.

mixing       one node: online /v1/etr requests (20 orders, a round's worth) at ~70% of an
             emulated ETR device's capacity, alone; then beside an offline flood of
             /v1/etr/bulk requests (200 orders each) sent as offline (classes) and sent as
             online (no classes: what happens without them). Device: 50 ms per call + 1 ms
             per row, batches of up to 256 rows.
routing      three simulated nodes (``ray.cluster_utils.Cluster``), one OrSolver replica each,
             the ingress on the head; the emulated solver call takes 100 ms on two nodes and
             200 ms on the third (a GPU type half as fast). Dispatch rounds at ~85% of the
             total capacity, routed by ``actors.router.BusyRouter`` vs Serve's default
             (power of two choices on queue length) vs round robin.
autoscaling  three nodes, up to 4 OrSolver replicas (100 ms emulated calls: 10 rounds/s
             each); load 1x -> 3x -> 1x (6, 18, 6 rounds/s); the Busy policy
             (``actors.autoscaling``) vs Serve's ``target_ongoing_requests`` policy.

Writes DIR/scheduler.csv, DIR/scheduler.png and (--json) every row.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from ops import local, ports
from ops.loadgen import HttpLoad, Run, beside_flood, encode_request, percentile_ms
from planner import generate_round
from serve_app.config import DispatchAppArgs
from serve_app.schemas import DispatchRequest, EtrRequest, OrderIn

MIX_DEVICE = {"per_call_ms": 50.0, "per_row_ms": 1.0}
SOLVER_CALL_MS = 100.0
#: The dispatch admission lane of the cluster benches' app (bench/fleet_vs_real.py's
#: simulation runs the same lane).
DISPATCH_LANE = {"max_in_flight": 64, "max_queued": 256}
DEFAULT_ROUTER = "ray.serve._private.request_router:PowerOfTwoChoicesRequestRouter"
SLO_MS = 500.0


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def etr_body(orders: list) -> bytes:
    req = EtrRequest(orders=[OrderIn.from_domain(o) for o in orders])
    return req.model_dump_json().encode()


def dispatch_bodies(n: int, seed: int) -> list[bytes]:
    return [
        DispatchRequest.from_domain(generate_round(20, 5, seed=seed + k)).model_dump_json().encode()
        for k in range(n)
    ]


# ---- mixing ---------------------------------------------------------------------------------
def write_mix_profile(out: Path) -> Path:
    points = [
        {
            "batch": b,
            "p50_ms": MIX_DEVICE["per_call_ms"] + MIX_DEVICE["per_row_ms"] * b,
            "p99_ms": MIX_DEVICE["per_call_ms"] + MIX_DEVICE["per_row_ms"] * b,
        }
        for b in (1, 16, 64, 256)
    ]
    path = out / "etr-emulated-mixing.json"
    path.write_text(
        json.dumps(
            {
                "model": "etr",
                "device_type": "T4",
                "runtime": "emulated-mixing",
                "estimate": True,
                "basis": "assumed: 50 ms per call + 1 ms per row (emulation)",
                "context_mb": 300,
                "weights_mb": 0.1,
                "workspace_mb": 0,
                "per_row_kb": 1,
                "points": points,
            }
        )
    )
    return path.resolve()


def section_mixing(out: Path, quick: bool) -> list[dict[str, Any]]:
    duration = 6.0 if quick else 20.0
    key = "bench-key"
    base = local.start(num_cpus=4).http
    try:
        args = DispatchAppArgs(
            backend="numpy",
            etr_runtime=f"emulated:{write_mix_profile(out)}",
            cache={"enabled": False},
            admission={"priority_key": key, "etr": {"max_in_flight": 64, "max_queued": 512}},
        )
        small = {"ray_actor_options": {"num_cpus": 0.25}}
        options = {"Ingress": small, "OrSolver": small, "Etr": small}
        local.run_app(args, options, name="mix", route_prefix="/mix")
        local.wait_ready(f"{base}/mix")
        online_orders = list(generate_round(0, 20 * 64, seed=1).orders)
        online = [
            encode_request(f"{base}/mix/v1/etr", etr_body(online_orders[k : k + 20]))
            for k in range(0, len(online_orders), 20)
        ]
        bulk_orders = list(generate_round(0, 200 * 16, seed=2).orders)
        bulk_bodies = [etr_body(bulk_orders[k : k + 200]) for k in range(0, len(bulk_orders), 200)]
        offline = [encode_request(f"{base}/mix/v1/etr/bulk", b) for b in bulk_bodies]
        promoted = [
            encode_request(
                f"{base}/mix/v1/etr/bulk",
                b,
                headers={"x-priority": "online", "x-priority-key": key},
            )
            for b in bulk_bodies
        ]
        device_rows_s = 256 / ((MIX_DEVICE["per_call_ms"] + 256 * MIX_DEVICE["per_row_ms"]) / 1e3)
        rate = 0.7 * device_rows_s / 20
        log(f"  device capacity ~{device_rows_s:.0f} rows/s; online at {rate:.1f} req/s (70%)")
        run(beside_flood(base, online, rate, [], 8, 2.0))  # warm-up
        rows = []
        for case, flood in (
            ("online alone", []),
            ("online + offline flood, classes", offline),
            ("online + offline flood, no classes", promoted),
        ):
            got_online, got_flood = run(beside_flood(base, online, rate, flood, 8, duration))
            ok = got_online.ok()
            flood_rows = 200 * len(got_flood.ok()) if got_flood else 0
            rows.append(
                {
                    "case": case,
                    "online_rps": round(got_online.goodput_rps(), 1),
                    "online_p50_ms": round(percentile_ms(ok, 50), 1),
                    "online_p99_ms": round(percentile_ms(ok, 99), 1),
                    "online_errors": len(got_online.results) - len(ok),
                    "offline_rows_s": round(flood_rows / duration, 1),
                    "offline_errors": (len(got_flood.results) - len(got_flood.ok()))
                    if got_flood
                    else 0,
                    # 503 = shed by admission (offline admitted only while online has room)
                    "offline_not_ok": dict(
                        Counter(str(r.status) for r in got_flood.results if r.status != 200)
                    )
                    if got_flood
                    else {},
                    "spare_rows_s": round(0.3 * device_rows_s, 1),
                    "generator_cpu": round(got_online.cpu_share, 3),
                }
            )
            log(f"  {rows[-1]}")
        alone = rows[0]["online_p99_ms"]
        for r in rows:
            r["online_p99_vs_alone"] = round(r["online_p99_ms"] / alone, 2) if alone else None
            r["offline_share_of_spare"] = round(r["offline_rows_s"] / r["spare_rows_s"], 2)
        return rows
    finally:
        local.stop()


# ---- clusters ---------------------------------------------------------------------------------
class ClusterApp:
    """A simulated cluster: the head (ingress) plus workers, each with one solver slot."""

    def __init__(self, workers: list[dict[str, float]], head: dict[str, float]) -> None:
        import os

        import ray
        from ray import serve
        from ray.cluster_utils import Cluster

        os.environ.update(local.AUTOSCALING_ENV)  # the nodes' raylets inherit it
        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 2,
                "resources": {"head_slot": 4, **head},
                "gcs_server_port": 0,
                "include_dashboard": False,
            },
        )
        for resources in workers:
            self.cluster.add_node(num_cpus=1, resources=resources)
        ray.init(address=self.cluster.address, log_to_driver=False)
        self.port = ports.free_port()
        serve.start(
            proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": self.port}
        )
        self.base = f"http://127.0.0.1:{self.port}"

    def deploy(self, solver: dict[str, Any], emulate: dict[str, Any], name: str = "orml") -> None:
        from ray import serve

        from serve_app.builder import build_app

        args = DispatchAppArgs(
            backend="numpy",
            etr_runtime="onnxruntime",
            emulate_solver=emulate,
            admission={"dispatch": DISPATCH_LANE},
        )
        on_head = {"num_cpus": 0.1, "resources": {"head_slot": 1}}
        options = {
            "OrSolver": {
                "ray_actor_options": {"num_cpus": 0.1, "resources": {"solver_slot": 1}},
                **solver,
            },
            "Etr": {"ray_actor_options": on_head},
            "Ingress": {"ray_actor_options": on_head},
        }
        serve.run(build_app(args, options), name=name, route_prefix="/")

    def close(self) -> None:
        import ray
        from ray import serve

        serve.shutdown()
        ray.shutdown()
        self.cluster.shutdown()


LOADS = (0.85, 1.0)


def section_routing(quick: bool) -> list[dict[str, Any]]:
    duration = 8.0 if quick else 25.0
    nodes = [{"solver_slot": 1, "gpu_fast": 1}, {"solver_slot": 1, "gpu_slow": 1}]
    app = ClusterApp(nodes, head={"solver_slot": 1, "gpu_fast": 1})
    emulate = {"call_ms": SOLVER_CALL_MS, "speed_by_node_resource": {"gpu_slow": 0.5}}
    capacity = 2 * 1000 / SOLVER_CALL_MS + 1000 / (2 * SOLVER_CALL_MS)  # 25 rounds/s
    bodies = dispatch_bodies(64, seed=100)
    requests = [encode_request(f"{app.base}/v1/dispatch", b) for b in bodies]
    rows = []
    try:
        for label, router in (
            ("BusyRouter (ours)", "actors.router:BusyRouter"),
            ("Serve default (pow-2 on queue)", DEFAULT_ROUTER),
            ("round robin", "actors.router:RoundRobinRouter"),
        ):
            config = {"request_router_class": router, "request_routing_stats_period_s": 1.0}
            app.deploy({"num_replicas": 3, "request_router_config": config}, emulate)
            local.wait_ready(app.base, 180)
            run(_open(app.base, requests, capacity / 3, 3.0))  # warm-up
            for load in LOADS:
                rows.append(_routing_row(app.base, requests, label, load * capacity, duration))
                rows[-1]["load"] = load
                log(f"  {rows[-1]}")
    finally:
        app.close()
    return rows


def _routing_row(
    base: str, requests: list[bytes], label: str, rate: float, duration: float
) -> dict[str, Any]:
    got = run(_open(base, requests, rate, duration))
    ok = got.ok()
    in_slo = sum(r.latency_s * 1e3 <= SLO_MS for r in ok)
    return {
        "case": label,
        "offered_rps": round(rate, 1),
        "goodput_rps": round(got.goodput_rps(), 2),
        "in_slo_rps": round(in_slo / got.wall_s, 2),
        "p50_ms": round(percentile_ms(ok, 50), 1),
        "p99_ms": round(percentile_ms(ok, 99), 1),
        "errors": len(got.results) - len(ok),
        "generator_cpu": round(got.cpu_share, 3),
    }


async def _open(base: str, requests: list[bytes], rate: float, duration_s: float) -> Run:
    gen = HttpLoad(base, max_connections=512, timeout_s=60)
    try:
        return await gen.open_loop(requests, rate, duration_s, seed=int(rate * 10))
    finally:
        await gen.close()


def section_autoscaling(quick: bool) -> list[dict[str, Any]]:
    from ray import serve

    phases = [(6.0, 15.0), (18.0, 30.0), (6.0, 30.0)]
    if quick:
        phases = [(6.0, 8.0), (18.0, 15.0), (6.0, 12.0)]
    nodes = [{"solver_slot": 2}, {"solver_slot": 1}]
    app = ClusterApp(nodes, head={"solver_slot": 1})
    emulate = {"call_ms": SOLVER_CALL_MS}
    bodies = dispatch_bodies(64, seed=200)
    requests = [encode_request(f"{app.base}/v1/dispatch", b) for b in bodies]
    common = {
        "min_replicas": 1,
        "max_replicas": 4,
        "upscale_delay_s": 2.0,
        "downscale_delay_s": 10.0,
        "metrics_interval_s": 1.0,
        "look_back_period_s": 3.0,
    }
    policies = {
        "Busy policy (ours)": {
            **common,
            "policy": {
                "policy_function": "actors.autoscaling:BusyAutoscalingPolicy",
                "policy_kwargs": {"target_busy": 0.6, "band": 0.1},
            },
        },
        "Serve target_ongoing_requests=1": {**common, "target_ongoing_requests": 1},
    }
    rows = []
    try:
        # Repeats alternate the order, so neither policy always runs on the warmer host.
        order = [
            (rep, label, policies[label])
            for rep in range(1 if quick else 3)
            for label in (list(policies) if rep % 2 == 0 else list(policies)[::-1])
        ]
        for rep, label, autoscaling in order:
            serve.delete("orml")  # every policy starts from min_replicas, not the last count
            app.deploy({"autoscaling_config": autoscaling, "max_ongoing_requests": 4}, emulate)
            local.wait_ready(app.base, 180)
            timeline: list[tuple[float, int]] = []
            stop = threading.Event()

            def watch(stop: threading.Event = stop, timeline: list = timeline) -> None:
                t0 = time.monotonic()
                while not stop.is_set():
                    status = serve.status().applications["orml"].deployments["OrSolver"]
                    timeline.append(
                        (time.monotonic() - t0, status.replica_states.get("RUNNING", 0))
                    )
                    stop.wait(0.5)

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            runs = []
            for rate, seconds in phases:
                runs.append(run(_open(app.base, requests, rate, seconds)))
            stop.set()
            watcher.join(5)
            step_at = phases[0][1]
            reached = next((t - step_at for t, n in timeline if t >= step_at and n >= 3), None)
            replica_s = sum(n * 0.5 for _, n in timeline)
            results = [r for got in runs for r in got.results]
            ok = [r for r in results if r.status == 200]
            rows.append(
                {
                    "case": label,
                    "rep": rep,
                    "to_capacity_s": None if reached is None else round(reached, 1),
                    "slo_attainment": round(
                        sum(r.latency_s * 1e3 <= SLO_MS for r in ok) / max(1, len(results)), 3
                    ),
                    "replica_seconds": round(replica_s, 1),
                    "max_replicas_seen": max((n for _, n in timeline), default=0),
                    "p99_ms": round(percentile_ms(ok, 99), 1),
                    "errors": len(results) - len(ok),
                    "phases": [
                        {
                            "rate": rate,
                            "p50_ms": round(percentile_ms(got.ok(), 50), 1),
                            "p99_ms": round(percentile_ms(got.ok(), 99), 1),
                            "slo": round(
                                sum(r.latency_s * 1e3 <= SLO_MS for r in got.ok())
                                / max(1, len(got.results)),
                                3,
                            ),
                        }
                        for (rate, _), got in zip(phases, runs, strict=True)
                    ],
                    "timeline": timeline,
                }
            )
            log(f"  { ({k: v for k, v in rows[-1].items() if k != 'timeline'}) }")
    finally:
        app.close()
    return rows


# ---- report -----------------------------------------------------------------------------------
def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    if result.get("mixing"):
        rows = result["mixing"]
        ax = axes[0]
        ax.bar(range(len(rows)), [r["online_p99_ms"] for r in rows], color=["grey", "C0", "C3"])
        ax.set_xticks(range(len(rows)), ["alone", "classes", "no classes"])
        ax.set(ylabel="online p99 ms", title="Online p99 beside an offline flood (emulated)")
    if result.get("routing"):
        rows = result["routing"]
        ax = axes[1]
        full = [r for r in rows if r["load"] == max(LOADS)]
        ax.bar(range(len(full)), [r["p99_ms"] for r in full], color=["C0", "grey", "silver"])
        ax.set_xticks(range(len(full)), ["ours", "Serve default", "round robin"])
        ax.set(ylabel="p99 ms", title="Routing, one node 2x slower (emulated)")
    if result.get("autoscaling"):
        ax = axes[2]
        for r in result["autoscaling"]:
            if r.get("rep", 0):
                continue
            t = [p[0] for p in r["timeline"]]
            ax.step(t, [p[1] for p in r["timeline"]], where="post", label=r["case"])
        ax.set(xlabel="s", ylabel="RUNNING replicas", title="Step load 1x-3x-1x (emulated)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = parser(__doc__, "the mixing experiment only, short phases (under a minute)")
    ap.add_argument("--only", nargs="*", choices=["mixing", "routing", "autoscaling"])
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sections = args.only or (["mixing"] if args.quick else ["mixing", "routing", "autoscaling"])
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "emulated": True}
    if "mixing" in sections:
        log("mixing: online ETR beside an offline flood (emulated device) ...")
        result["mixing"] = section_mixing(args.out, args.quick)
    if "routing" in sections:
        log("routing: three nodes, one 2x slower (emulated solver) ...")
        result["routing"] = section_routing(args.quick)
    if "autoscaling" in sections:
        log("autoscaling: step load 1x -> 3x -> 1x (emulated solver) ...")
        result["autoscaling"] = section_autoscaling(args.quick)
    report(result)
    flat = [
        {"section": s, **{k: v for k, v in r.items() if k != "timeline"}}
        for s in ("mixing", "routing", "autoscaling")
        for r in result.get(s, [])
    ]
    write_csv(args.out / "scheduler.csv", flat)
    plot(result, args.out / "scheduler.png")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    log(f"wrote {args.out / 'scheduler.csv'} and {args.out / 'scheduler.png'}")


def report(result: dict[str, Any]) -> None:
    print("\nAll devices EMULATED (a stated call time slept off the CPU).")
    if result.get("mixing"):
        print("\n## Mixing: online /v1/etr at ~70% of the device beside an offline bulk flood")
        print(
            "| case | online req/s | p50 ms | p99 ms | p99 vs alone | offline rows/s | "
            "share of spare | errors |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in result["mixing"]:
            print(
                f"| {r['case']} | {r['online_rps']} | {r['online_p50_ms']} | {r['online_p99_ms']} "
                f"| {r['online_p99_vs_alone']}x | {r['offline_rows_s']} | "
                f"{r['offline_share_of_spare']} | {r['online_errors']}/{r['offline_errors']} |"
            )
    if result.get("routing"):
        print("\n## Routing: 3 nodes, one device 2x slower (capacity 25 rounds/s)")
        print("| router | load | goodput/s | in SLO (500 ms)/s | p50 ms | p99 ms | errors |")
        print("|---|---|---|---|---|---|---|")
        for r in result["routing"]:
            print(
                f"| {r['case']} | {r['load']}x | {r['goodput_rps']} | {r['in_slo_rps']} | "
                f"{r['p50_ms']} | {r['p99_ms']} | {r['errors']} |"
            )
    if result.get("autoscaling"):
        print("\n## Autoscaling: step load 1x -> 3x -> 1x")
        print(
            "| policy | to capacity (3 replicas) s | SLO attainment | replica-seconds | "
            "max replicas | p99 ms | errors |"
        )
        print("|---|---|---|---|---|---|---|")
        rows = result["autoscaling"]
        for r in rows:
            print(
                f"| {r['case']} (run {r.get('rep', 0) + 1}) | {r['to_capacity_s']} | "
                f"{r['slo_attainment']} | {r['replica_seconds']} | {r['max_replicas_seen']} | "
                f"{r['p99_ms']} | {r['errors']} |"
            )
        for case in dict.fromkeys(r["case"] for r in rows):
            mine = [r for r in rows if r["case"] == case]
            if len(mine) > 1:
                keys = ("to_capacity_s", "slo_attainment", "replica_seconds", "p99_ms")
                values = {k: [r[k] for r in mine if r[k] is not None] for k in keys}
                med = {k: statistics.median(v) if v else None for k, v in values.items()}
                print(
                    f"| **{case}, median of {len(mine)}** | {med['to_capacity_s']} | "
                    f"{med['slo_attainment']} | {med['replica_seconds']} | | {med['p99_ms']} | |"
                )


if __name__ == "__main__":
    main()
