"""The serving path under load: overhead against Ray Serve's floor, ETR batching, overload,
gRPC vs HTTP, the ETR cache. Every comparison is measured side by side in one run.

    python bench/serve_load.py [--quick] [--json PATH] [--out DIR] [--only SECTION ...]

Starts a local Ray + Serve (the shared harness, Serve's throughput mode) and, section by
section, deploys the apps it compares, loads them over loopback with the lean open-loop
generator (``ops.loadgen``; its own CPU share is reported with each run), and removes
them:

overhead   one dispatch at a time: ``dispatch_round`` in this process vs the app over HTTP
           (JSON and msgpack) and gRPC, vs a no-op app with the same hops and payload sizes
           (``bench/floor_app.py``: 0 and 2 hops). Overhead = HTTP p50 - in-process p50.
batching   /v1/etr one-order requests, cache off: the most requests/s with p99 <= 100 ms,
           batching on vs off, on the CPU model and on an EMULATED GPU (``etr.runtime_
           emulated``: the CPU model's answers at the times of an assumed T4 call-cost model).
overload   dispatch at 0.8x, 1x, 2x and 3x the sustainable rate (measured first), with
           admission as shipped vs admission off (Serve's own queueing, today's behaviour).
grpc       dispatch and ETR: p50 one at a time and the most requests/s, HTTP vs gRPC.
cache      /v1/etr with ~90% of requests repeating an earlier order: cache on vs off.

Writes DIR/serve_load.csv, DIR/serve_load.png and (--json) every row.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from etr import features_from_orders, load_artifact, load_runtime
from ops import local
from ops.loadgen import HttpLoad, Run, encode_request, percentile_ms
from planner import dispatch_round, generate_round
from serve_app.config import DispatchAppArgs
from serve_app.schemas import DispatchRequest, OrderIn

P99_TARGET_MS = 100.0
WARMUP_S = 2.0
SMALL = {"ray_actor_options": {"num_cpus": 0.25}}
OPTIONS = {d: SMALL for d in ("Ingress", "OrSolver", "Etr")}
#: The call costs the emulated ETR device sleeps, per call + per row (ms): ASSUMPTIONS, not
#: measurements (no GPU profile of this model exists yet). "small": our 19 KB MLP as a
#: TensorRT engine on a T4 (launch, copies and a stream sync dominate). "deep": a model of the
#: size the source articles serve (3-5 GB), where a call costs milliseconds of compute.
EMULATED = {"small": (2.0, 0.002), "deep": (15.0, 0.05)}
JSON = "application/json"
MSGPACK = "application/x-msgpack"


def deploy(name: str, args: DispatchAppArgs, etr_user: dict | None = None) -> str:
    options = {k: dict(v) for k, v in OPTIONS.items()}
    if etr_user is not None:
        options["Etr"] = {**options["Etr"], "user_config": etr_user}
    local.run_app(args, options, name=name, route_prefix=f"/{name}")
    return f"/{name}"


def undeploy(*names: str) -> None:
    from ray import serve

    for name in names:
        serve.delete(name.strip("/"), _blocking=True)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def load(base: str) -> HttpLoad:
    return HttpLoad(base, max_connections=1024, timeout_s=60.0)


def sequential_ms(base: str, requests: list[bytes], n: int) -> tuple[list[float], float]:
    """Latencies (ms) of n requests one at a time, and the generator's CPU share."""

    async def go() -> Run:
        gen = load(base)
        try:
            await gen.send(requests[0])  # a warm connection
            return await gen.sequence(requests, n)
        finally:
            await gen.close()

    got = run(go())
    bad = [r.status for r in got.results if r.status != 200]
    if bad:
        raise RuntimeError(f"{base}: non-200 answers {bad[:5]}")
    return [r.latency_s * 1e3 for r in got.results], got.cpu_share


def sweep(
    base: str,
    variants: dict[str, list[bytes]],
    rates: list[float],
    duration_s: float,
) -> list[dict[str, Any]]:
    """Open-loop Poisson steps, every variant at each rate in turn (order alternating per step,
    so drift on a shared host hits them alike), until every variant's p99 passes 20x the
    target or >5% fail; a row per variant and step. A warm-up of each goes first, unrecorded.

    variants : case name -> the encoded requests to cycle through.
    """
    for requests in variants.values():
        run(_open(base, requests, rates[0], WARMUP_S))
    rows: list[dict[str, Any]] = []
    live = list(variants)
    for step, rate in enumerate(rates):
        order = live if step % 2 == 0 else live[::-1]
        for case in order:
            got = run(_open(base, variants[case], rate, duration_s))
            ok = got.ok()
            row = {
                "case": case,
                "offered_rps": rate,
                "achieved_rps": round(got.goodput_rps(), 1),
                "p50_ms": round(percentile_ms(ok, 50), 2),
                "p99_ms": round(percentile_ms(ok, 99), 2),
                "errors": len(got.results) - len(ok),
                "generator_cpu": round(got.cpu_share, 3),
            }
            rows.append(row)
            log(
                f"  {case:<32} offered {rate:6.0f}/s achieved {row['achieved_rps']:7.1f}/s "
                f"p50 {row['p50_ms']:7.1f} p99 {row['p99_ms']:8.1f} ms errors {row['errors']} "
                f"gen cpu {row['generator_cpu']:.2f}"
            )
            saturated = row["errors"] > 0.05 * max(1, len(got.results))
            if saturated or row["p99_ms"] > 20 * P99_TARGET_MS:
                live.remove(case)
        if not live:
            break
    return rows


async def _open(base: str, requests: list[bytes], rate: float, duration_s: float) -> Run:
    gen = load(base)
    try:
        return await gen.open_loop(requests, rate, duration_s, seed=int(rate))
    finally:
        await gen.close()


def saturation(rows: list[dict[str, Any]], case: str) -> float:
    """The most requests/s answered without errors at any step (latency aside)."""
    return max(
        (r["achieved_rps"] for r in rows if r["case"] == case and r["errors"] == 0), default=0.0
    )


def max_ok(rows: list[dict[str, Any]], case: str) -> float:
    ok = [
        r["achieved_rps"]
        for r in rows
        if r["case"] == case and r["p99_ms"] <= P99_TARGET_MS and r["errors"] == 0
    ]
    return max(ok, default=0.0)


def etr_requests(base: str, path: str, orders: list) -> list[bytes]:
    return [
        encode_request(
            f"{base}{path}/v1/etr",
            json.dumps({"orders": [json.loads(OrderIn.from_domain(o).model_dump_json())]}).encode(),
        )
        for o in orders
    ]


def dispatch_requests(base: str, path: str, rounds: list, binary: bool = False) -> list[bytes]:
    out = []
    for r in rounds:
        req = DispatchRequest.from_domain(r)
        if binary:
            import msgpack

            body = msgpack.packb(req.model_dump(mode="json"))
            out.append(
                encode_request(f"{base}{path}/v1/dispatch", body, MSGPACK, {"Accept": MSGPACK})
            )
        else:
            out.append(encode_request(f"{base}{path}/v1/dispatch", req.model_dump_json().encode()))
    return out


# ---- sections ---------------------------------------------------------------------------------
def section_overhead(base: str, grpc_address: str, quick: bool) -> dict[str, Any]:
    """Our HTTP overhead per dispatch vs the floor, JSON and msgpack; gRPC beside."""
    from floor_app import dispatch_sample, floor_app
    from ray import serve

    n = 15 if quick else 60
    rounds = [generate_round(100, 20, seed=900 + k) for k in range(n)]  # new orders each
    runtime = load_runtime(load_artifact("etr"), "onnxruntime")
    direct = []
    for r in rounds:
        minutes = runtime.predict(features_from_orders(r.orders))
        t0 = time.perf_counter()
        dispatch_round(r, backend="numpy", etr_minutes=minutes)
        direct.append((time.perf_counter() - t0) * 1e3)
    path = deploy("ovh", DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime"))
    local.wait_ready(base + path)
    sample, answer = dispatch_sample(rounds[0])
    for hops in (0, 2):
        serve.run(
            floor_app(hops, sample, answer), name=f"floor{hops}", route_prefix=f"/floor{hops}"
        )
    out: dict[str, Any] = {"direct_p50_ms": statistics.median(direct)}
    cases: dict[str, Callable[[], list[bytes]]] = {
        "ours_json": lambda: dispatch_requests(base, path, rounds),
        "ours_msgpack": lambda: dispatch_requests(base, path, rounds, binary=True),
        "floor0_json": lambda: dispatch_requests(base, "/floor0", rounds),
        "floor2_json": lambda: dispatch_requests(base, "/floor2", rounds),
        "floor0_msgpack": lambda: dispatch_requests(base, "/floor0", rounds, binary=True),
        "floor2_msgpack": lambda: dispatch_requests(base, "/floor2", rounds, binary=True),
    }
    # Warm every path, then interleave the cases so drift on a shared host hits them alike.
    requests = {case: make() for case, make in cases.items()}
    for reqs in requests.values():
        sequential_ms(base, reqs, 3)
    lat: dict[str, list[float]] = {case: [] for case in cases}
    cpu: dict[str, list[float]] = {case: [] for case in cases}
    for k in range(0, n, 5):
        for case, reqs in requests.items():
            got, share = sequential_ms(base, reqs[k : k + 5], 5)
            lat[case] += got
            cpu[case].append(share)
    for case in cases:
        out[f"{case}_p50_ms"] = statistics.median(lat[case])
        out[f"{case}_generator_cpu"] = round(max(cpu[case]), 3)
    out["grpc_p50_ms"] = statistics.median(grpc_sequential_ms(grpc_address, "ovh", rounds))
    out["ours_json_overhead_ms"] = out["ours_json_p50_ms"] - out["direct_p50_ms"]
    out["ours_msgpack_overhead_ms"] = out["ours_msgpack_p50_ms"] - out["direct_p50_ms"]
    out["grpc_overhead_ms"] = out["grpc_p50_ms"] - out["direct_p50_ms"]
    out["json_vs_floor2"] = out["ours_json_overhead_ms"] / out["floor2_json_p50_ms"]
    out["msgpack_vs_floor2"] = out["ours_msgpack_overhead_ms"] / out["floor2_msgpack_p50_ms"]
    undeploy(path, "floor0", "floor2")
    return out


def grpc_sequential_ms(address: str, app: str, rounds: list) -> list[float]:
    from serve_app.grpc_api.client import OrmlGrpcClient

    out = []
    with OrmlGrpcClient(address, application=app) as client:
        client.dispatch(rounds[0])
        for r in rounds:
            t0 = time.perf_counter()
            client.dispatch(r)
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def section_batching(base: str, quick: bool, profiles: dict[str, Path]) -> list[dict[str, Any]]:
    """ETR one-order requests, cache off: batching on vs off, CPU model and emulated GPUs."""
    duration = 3.0 if quick else 8.0
    orders = list(generate_round(0, 512, seed=3).orders)
    no_cache = {"enabled": False}
    rows = []
    variants = [
        ("cpu", "onnxruntime", [100, 200, 300] if quick else [100, 150, 200, 250, 300, 400]),
        (
            "emulated T4 small",
            f"emulated:{profiles['small']}",
            [100, 200, 300] if quick else [100, 150, 200, 250, 300, 400],
        ),
        (
            "emulated T4 deep",
            f"emulated:{profiles['deep']}",
            [30, 60, 120, 240] if quick else [30, 45, 60, 90, 120, 160, 200, 250],
        ),
    ]
    for label, runtime, rates in variants:
        requests, paths = {}, []
        for batching in (True, False):
            name = f"etr{'b' if batching else 'u'}{len(rows)}"
            args = DispatchAppArgs(backend="numpy", etr_runtime=runtime, cache=no_cache)
            path = deploy(name, args, {"max_batch_size": 256, "batching": batching})
            paths.append(path)
            requests[f"etr {label} batching {'on' if batching else 'off'}"] = etr_requests(
                base, path, orders
            )
        rows += sweep(base, requests, rates, duration)
        undeploy(*paths)
    return rows


def section_overload(base: str, quick: bool) -> list[dict[str, Any]]:
    """Dispatch at 0.8x..3x the sustainable rate, admission as shipped vs off."""
    duration = 4.0 if quick else 10.0
    rounds = [generate_round(100, 20, seed=700 + k) for k in range(40)]
    shipped = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime")
    huge = {"max_in_flight": 10_000, "max_queued": 10_000}
    off = shipped.model_copy(
        update={
            "admission": shipped.admission.model_copy(
                update={"dispatch": shipped.admission.dispatch.model_copy(update=huge)}
            )
        }
    )
    rows = []
    with_path = deploy("adm", shipped)
    off_path = deploy("noadm", off)
    local.wait_ready(base + with_path)
    local.wait_ready(base + off_path)
    reqs = {p: dispatch_requests(base, p, rounds) for p in (with_path, off_path)}
    # Sustainable rate: closed loop at the lane's concurrency, on the shipped app.
    got = run(_closed(base, reqs[with_path], 4, duration))
    peak = got.goodput_rps()
    log(f"  sustainable dispatch rate ~{peak:.1f}/s (closed loop, 4 in flight)")
    for factor in (0.8, 1.0, 2.0, 3.0):
        for label, p in (("admission", with_path), ("no admission", off_path)):
            got = run(_open(base, reqs[p], peak * factor, duration))
            ok, shed = got.ok(), [r for r in got.results if r.status in (429, 503)]
            rows.append(
                {
                    "case": f"dispatch {label}",
                    "load": factor,
                    "offered_rps": round(peak * factor, 1),
                    "goodput_rps": round(got.goodput_rps(), 1),
                    "goodput_vs_peak": round(got.goodput_rps() / peak, 3),
                    "sent": len(got.results),
                    "shed": len(shed),
                    "shed_with_retry_after": sum(r.retry_after is not None for r in shed),
                    "other_errors": len(got.results) - len(ok) - len(shed),
                    "p50_ms": round(percentile_ms(ok, 50), 1),
                    "p99_ms": round(percentile_ms(ok, 99), 1),
                    "shed_p50_ms": round(percentile_ms(shed, 50), 2),
                    "generator_cpu": round(got.cpu_share, 3),
                }
            )
            log(f"  {rows[-1]}")
    undeploy(with_path, off_path)
    return rows


async def _closed(base: str, requests: list[bytes], concurrency: int, duration_s: float) -> Run:
    gen = load(base)
    try:
        return await gen.closed_loop(requests, concurrency, duration_s)
    finally:
        await gen.close()


def section_grpc(base: str, grpc_address: str, quick: bool) -> list[dict[str, Any]]:
    """p50 one at a time and closed-loop throughput, HTTP vs gRPC, dispatch and ETR."""
    duration = 3.0 if quick else 8.0
    args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", cache={"enabled": False})
    path = deploy("proto", args)  # cache off: both protocols do the same work
    local.wait_ready(base + path)
    rounds = [generate_round(100, 20, seed=1300 + k) for k in range(30)]
    orders = list(generate_round(0, 512, seed=8).orders)
    rows = []
    for what, reqs, conc in (
        ("dispatch", dispatch_requests(base, path, rounds), 4),
        ("etr", etr_requests(base, path, orders), 32),
    ):
        lat, _ = sequential_ms(base, reqs, 30)
        got = run(_closed(base, reqs, conc, duration))
        rows.append(
            {
                "case": f"{what} http",
                "p50_ms": round(statistics.median(lat), 2),
                "max_rps": round(got.goodput_rps(), 1),
                "concurrency": conc,
                "generator_cpu": round(got.cpu_share, 3),
            }
        )
        g_lat, g_rps, g_cpu = run(
            _grpc_load(grpc_address, "proto", what, rounds, orders, conc, duration)
        )
        rows.append(
            {
                "case": f"{what} grpc",
                "p50_ms": round(statistics.median(g_lat), 2),
                "max_rps": round(g_rps, 1),
                "concurrency": conc,
                "generator_cpu": round(g_cpu, 3),
            }
        )
        log(f"  {rows[-2]}\n  {rows[-1]}")
    undeploy(path)
    return rows


async def _grpc_load(
    address: str, app: str, what: str, rounds: list, orders: list, conc: int, duration_s: float
) -> tuple[list[float], float, float]:
    import grpc

    from serve_app.grpc_api import orml_pb2 as pb
    from serve_app.grpc_api import orml_pb2_grpc
    from serve_app.schemas import EtrRequest

    if what == "dispatch":
        messages = [
            pb.DispatchRequest(**DispatchRequest.from_domain(r).model_dump(exclude_none=True))
            for r in rounds
        ]
    else:
        messages = [
            pb.EtrRequest(
                **EtrRequest(orders=[OrderIn.from_domain(o)]).model_dump(exclude_none=True)
            )
            for o in orders
        ]
    metadata = (("application", app), ("x-timeout-ms", "30000"))
    async with grpc.aio.insecure_channel(address) as channel:
        stub = orml_pb2_grpc.OrmlStub(channel)
        call = stub.Dispatch if what == "dispatch" else stub.Etr
        await call(messages[0], metadata=metadata)
        lat = []
        for m in messages[:30]:
            t0 = time.perf_counter()
            await call(m, metadata=metadata)
            lat.append((time.perf_counter() - t0) * 1e3)
        done = 0
        t0, cpu0 = time.perf_counter(), time.process_time()

        async def worker(k: int) -> None:
            nonlocal done
            while time.perf_counter() - t0 < duration_s:
                try:
                    await call(messages[k % len(messages)], metadata=metadata)
                    done += 1
                except grpc.aio.AioRpcError:
                    pass
                k += conc

        await asyncio.gather(*(worker(k) for k in range(conc)))
        wall = time.perf_counter() - t0
    return lat, done / wall, (time.process_time() - cpu0) / wall


def section_cache(base: str, quick: bool) -> list[dict[str, Any]]:
    """/v1/etr, ~90% of requests repeat an earlier order: cache on vs off."""
    duration = 3.0 if quick else 8.0
    rng = np.random.default_rng(5)
    pool = list(generate_round(0, 64, seed=11).orders)
    fresh = iter(generate_round(0, 4096, seed=12).orders)
    stream = [
        pool[int(rng.integers(len(pool)))] if rng.random() < 0.9 else next(fresh)
        for _ in range(3000)
    ]
    requests, paths = {}, []
    for label, enabled in (("on", True), ("off", False)):
        args = DispatchAppArgs(
            backend="numpy", etr_runtime="onnxruntime", cache={"enabled": enabled}
        )
        path = deploy(f"cache{label}", args)
        paths.append(path)
        requests[f"etr 90% repeats cache {label}"] = etr_requests(base, path, stream)
    rates = [200, 400, 800] if quick else [100, 200, 300, 400, 600, 800, 1200, 1600]
    rows = sweep(base, requests, rates, duration)
    undeploy(*paths)
    return rows


# ---- report -----------------------------------------------------------------------------------
def write_profiles(out: Path) -> dict[str, Path]:
    """The emulated devices' profiles (placement format) from ``EMULATED``; their paths."""
    paths = {}
    for name, (per_call_ms, per_row_ms) in EMULATED.items():
        points = [
            {
                "batch": b,
                "p50_ms": per_call_ms + per_row_ms * b,
                "p99_ms": per_call_ms + per_row_ms * b,
            }
            for b in (1, 8, 64, 256, 1024)
        ]
        profile = {
            "model": "etr",
            "device_type": "T4",
            "runtime": f"emulated-{name}",
            "estimate": True,
            "basis": f"assumed: {per_call_ms} ms per call + {per_row_ms} ms per row "
            "(emulation, not a measurement)",
            "context_mb": 300,
            "weights_mb": 0.1,
            "workspace_mb": 0,
            "per_row_kb": 1,
            "points": points,
        }
        paths[name] = out / f"etr-emulated-T4-{name}.json"
        paths[name].write_text(json.dumps(profile, indent=1))
    return paths


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for case in dict.fromkeys(r["case"] for r in result.get("batching", [])):
        mine = [r for r in result["batching"] if r["case"] == case]
        ax.plot([r["achieved_rps"] for r in mine], [r["p99_ms"] for r in mine], "o-", label=case)
    ax.axhline(P99_TARGET_MS, color="grey", ls="--", lw=1)
    ax.set(
        xlabel="achieved requests/s",
        ylabel="p99 ms",
        yscale="log",
        title="ETR batching (emulated GPU labelled)",
    )
    ax.legend(fontsize=7)
    ax = axes[1]
    for case in dict.fromkeys(r["case"] for r in result.get("overload", [])):
        mine = [r for r in result["overload"] if r["case"] == case]
        ax.plot([r["load"] for r in mine], [r["goodput_rps"] for r in mine], "o-", label=case)
    ax.set(
        xlabel="offered / sustainable rate",
        ylabel="goodput (200s per s)",
        title="Dispatch under overload",
    )
    ax.legend(fontsize=7)
    ax = axes[2]
    o = result.get("overhead")
    if o:
        values = [
            o["ours_json_overhead_ms"],
            o["floor2_json_p50_ms"],
            o["ours_msgpack_overhead_ms"],
            o["floor2_msgpack_p50_ms"],
        ]
        ax.bar(range(4), values, color=["C0", "grey", "C1", "silver"])
        ax.set_xticks(
            range(4), ["ours JSON", "floor JSON", "ours msgpack", "floor msgpack"], fontsize=8
        )
        ax.set(ylabel="ms per dispatch (p50)", title="Serving overhead vs the 2-hop floor")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = parser(__doc__, "short steps, fewer rates (a few minutes)")
    ap.add_argument(
        "--only",
        nargs="*",
        choices=["overhead", "batching", "overload", "grpc", "cache"],
        help="run only these sections",
    )
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sections = args.only or ["overhead", "batching", "overload", "grpc", "cache"]
    profiles = {k: v.resolve() for k, v in write_profiles(args.out).items()}
    log("starting Ray and Serve (throughput mode) ...")
    endpoints = local.start(num_cpus=4)
    base = endpoints.http
    result: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "quick": args.quick}
    try:
        if "overhead" in sections:
            log("overhead: one dispatch at a time, ours vs the floor ...")
            result["overhead"] = section_overhead(base, endpoints.grpc, args.quick)
        if "batching" in sections:
            log("batching: ETR one-order requests, cache off ...")
            result["batching"] = section_batching(base, args.quick, profiles)
        if "overload" in sections:
            log("overload: dispatch at 0.8x..3x the sustainable rate ...")
            result["overload"] = section_overload(base, args.quick)
        if "grpc" in sections:
            log("grpc: HTTP vs gRPC ...")
            result["grpc"] = section_grpc(base, endpoints.grpc, args.quick)
        if "cache" in sections:
            log("cache: 90% repeated orders, on vs off ...")
            result["cache"] = section_cache(base, args.quick)
    finally:
        local.stop()
    report(result)
    rows = [
        dict(r, section=s)
        for s in ("batching", "overload", "grpc", "cache")
        for r in result.get(s, [])
    ]
    write_csv(args.out / "serve_load.csv", rows)
    plot(result, args.out / "serve_load.png")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    log(f"wrote {args.out / 'serve_load.csv'} and {args.out / 'serve_load.png'}")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def report(result: dict[str, Any]) -> None:
    o = result.get("overhead")
    if o:
        print("\n## Overhead per 100x20 dispatch, one at a time (p50, ms)")
        print("| path | p50 | overhead (- in-process) | 2-hop floor | ratio |")
        print("|---|---|---|---|---|")
        print(f"| in-process dispatch_round | {o['direct_p50_ms']:.1f} | | | |")
        for fmt in ("json", "msgpack"):
            print(
                f"| HTTP {fmt} | {o[f'ours_{fmt}_p50_ms']:.1f} | "
                f"{o[f'ours_{fmt}_overhead_ms']:.1f} | {o[f'floor2_{fmt}_p50_ms']:.1f} "
                f"(0 hops {o[f'floor0_{fmt}_p50_ms']:.1f}) | "
                f"{o[f'ours_{fmt}_overhead_ms'] / o[f'floor2_{fmt}_p50_ms']:.2f}x |"
            )
        print(f"| gRPC | {o['grpc_p50_ms']:.1f} | {o['grpc_overhead_ms']:.1f} | | |")
    if result.get("batching"):
        rows = result["batching"]
        print("\n## ETR batching, one-order requests: requests/s at p99 <= 100 ms, and saturation")
        print(
            "| device | on, p99 <= 100 ms | off, p99 <= 100 ms | ratio | on, saturated | "
            "off, saturated | ratio |"
        )
        print("|---|---|---|---|---|---|---|")
        for label in ("cpu", "emulated T4 small", "emulated T4 deep"):
            on, off = (max_ok(rows, f"etr {label} batching {s}") for s in ("on", "off"))
            son, soff = (saturation(rows, f"etr {label} batching {s}") for s in ("on", "off"))
            print(
                f"| {label} | {on:.0f} | {off:.0f} | {ratio(on, off)} | {son:.0f} | "
                f"{soff:.0f} | {ratio(son, soff)} |"
            )
    if result.get("overload"):
        print("\n## Dispatch under overload (100x20 rounds)")
        print(
            "| admission | load | offered/s | goodput/s | vs peak | shed | other errors "
            "| p50 | p99 | shed p50 ms |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in result["overload"]:
            print(
                f"| {r['case'].removeprefix('dispatch ')} | {r['load']}x | {r['offered_rps']} | "
                f"{r['goodput_rps']} | {r['goodput_vs_peak']:.2f} | {r['shed']} | "
                f"{r['other_errors']} | {r['p50_ms']} | {r['p99_ms']} | {r['shed_p50_ms']} |"
            )
    if result.get("grpc"):
        print("\n## HTTP vs gRPC")
        print("| case | p50 ms (one at a time) | max req/s (closed loop) | concurrency |")
        print("|---|---|---|---|")
        for r in result["grpc"]:
            print(f"| {r['case']} | {r['p50_ms']} | {r['max_rps']} | {r['concurrency']} |")
    if result.get("cache"):
        rows = result["cache"]
        on, off = (max_ok(rows, f"etr 90% repeats cache {s}") for s in ("on", "off"))
        son, soff = (saturation(rows, f"etr 90% repeats cache {s}") for s in ("on", "off"))
        print("\n## /v1/etr, ~90% repeated orders: requests/s at p99 <= 100 ms, and saturation")
        print(f"p99 <= 100 ms: cache on {on:.0f}/s, off {off:.0f}/s: {ratio(on, off)}")
        print(f"saturation: cache on {son:.0f}/s, off {soff:.0f}/s: {ratio(son, soff)}")


if __name__ == "__main__":
    main()
