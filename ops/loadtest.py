"""``orml loadtest``: a perf_analyzer-style sweep against a running app.

Steps through concurrency levels (closed loop: that many requests always in flight) or request
rates (open loop, Poisson arrivals), each for ``duration_s`` after a short warm-up, and reports
per step: answered/s, p50/p90/p99 latency of the 200s, shed answers (503/429), other errors,
and the generator's own CPU share (so a reader can see the generator was not the limit). It
stops by itself at the end of the list, or earlier when a step passes ``stop_p99_ms``, when
more than ``stop_error_share`` of a step's requests fail or are shed, or (concurrency sweeps)
when more concurrency stops adding throughput (< 5% more: the app is saturated).

Requests are realistic bodies, encoded once: generated dispatch rounds or ETR orders, or the
busiest rounds of a real MDRP delivery day (``planner.mdrp``); over HTTP (JSON) or gRPC
(protobuf, the same API).
"""

from __future__ import annotations

import asyncio
import csv
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from ops.loadgen import GrpcLoad, HttpLoad, Load, Run, encode_request, percentile_ms

SATURATION_GAIN = 1.05  # a concurrency step must add 5% throughput to go on
GRPC_METHODS = {"dispatch": "/orml.v1.Orml/Dispatch", "etr": "/orml.v1.Orml/Etr"}
WARMUP_S = 1.0


@dataclass(frozen=True)
class Step:
    mode: str  # "concurrency" or "rate"
    value: float
    requests: int
    throughput_rps: float  # 200s per second
    p50_ms: float
    p90_ms: float
    p99_ms: float
    shed: int  # 503 / 429 answers (the app's admission said no, with Retry-After)
    errors: int  # anything else that was not a 200, timeouts included
    generator_cpu: float  # the generator's CPU seconds per wall second (1.0 = one core)


def requests_for(
    endpoint: str,
    base_url: str,
    *,
    count: int = 64,
    seed: int = 0,
    riders: int = 100,
    orders: int = 20,
    mdrp_day: Path | None = None,
    token: str | None = None,
    protocol: str = "http",
) -> list[bytes]:
    """Encoded requests: ``endpoint`` "dispatch" (generated rounds, or the rounds of
    ``mdrp_day`` when given) or "etr" (``orders`` generated orders per request); whole HTTP
    requests to ``base_url``, or (``protocol`` "grpc") serialized protobuf messages."""
    from planner import generate_round
    from serve_app.schemas import DispatchRequest, EtrRequest, OrderIn

    headers = {"authorization": f"Bearer {token}"} if token else None
    models: list[EtrRequest] | list[DispatchRequest]
    if endpoint == "etr":
        models = [
            EtrRequest(
                orders=[
                    OrderIn.from_domain(o) for o in generate_round(0, orders, seed=seed + k).orders
                ]
            )
            for k in range(count)
        ]
    elif endpoint == "dispatch":
        if mdrp_day is not None:
            rounds = _mdrp_rounds(mdrp_day, count)
        else:
            rounds = [generate_round(riders, orders, seed=seed + k) for k in range(count)]
        models = [DispatchRequest.from_domain(r) for r in rounds]
    else:
        raise ValueError(f"endpoint must be dispatch or etr, got {endpoint!r}")
    if protocol == "grpc":
        from serve_app.grpc_api import orml_pb2 as pb

        message = pb.DispatchRequest if endpoint == "dispatch" else pb.EtrRequest
        return [message(**m.model_dump(exclude_none=True)).SerializeToString() for m in models]
    url = f"{base_url}/v1/{endpoint}"
    return [encode_request(url, m.model_dump_json().encode(), headers=headers) for m in models]


def _mdrp_rounds(folder: Path, count: int) -> list:
    """The first ``count`` busy rounds of a replayed MDRP day (most open orders first)."""
    from planner.mdrp import ReplayPolicy, load_instance, replay
    from planner.mdrp.replay import decide_in_process

    rounds = []

    def record(round_):
        rounds.append(round_)
        return decide_in_process(round_)

    # The day's own rounds: rollouts' copies of the day would add rounds no dispatcher sent.
    replay(load_instance(folder), ReplayPolicy(rollout_min=0), decide=record)
    rounds.sort(key=lambda r: -len(r.orders))
    return rounds[:count]


async def _step(
    load: HttpLoad, requests: Sequence[bytes], mode: str, value: float, seconds: float
) -> Run:
    if mode == "concurrency":
        return await load.closed_loop(requests, int(value), seconds)
    return await load.open_loop(requests, value, seconds)


def sweep(
    base_url: str,
    requests: Sequence[bytes],
    *,
    concurrency: Sequence[int] = (),
    rates: Sequence[float] = (),
    duration_s: float = 10.0,
    stop_p99_ms: float | None = None,
    stop_error_share: float = 0.05,
    timeout_s: float = 30.0,
    progress: Callable[[int, int, Step], None] | None = None,
    protocol: str = "http",
    endpoint: str = "dispatch",
    token: str | None = None,
) -> list[Step]:
    """Run the steps (concurrency levels, else rates); see the module docstring. For gRPC
    ``base_url`` is host:port and ``endpoint`` picks the method; ``token`` goes as metadata
    (HTTP requests carry theirs already)."""
    if bool(concurrency) == bool(rates):
        raise ValueError("give concurrency levels or request rates (one of the two)")
    mode = "concurrency" if concurrency else "rate"
    values = [float(v) for v in (concurrency or rates)]
    if any(v <= 0 for v in values):
        raise ValueError(f"{mode} values must be > 0")

    async def run_all() -> list[Step]:
        load: Load
        if protocol == "grpc":
            meta = (("authorization", f"Bearer {token}"),) if token else ()
            load = GrpcLoad(base_url, GRPC_METHODS[endpoint], timeout_s, meta)
        else:
            connections = max(64, int(max(values)) * 2)
            load = HttpLoad(base_url, max_connections=connections, timeout_s=timeout_s)
        steps: list[Step] = []
        try:
            for k, value in enumerate(values):
                await _step(load, requests, mode, value, WARMUP_S)
                got = await _step(load, requests, mode, value, duration_s)
                step = _summary(got, mode, value)
                steps.append(step)
                if progress is not None:
                    progress(k + 1, len(values), step)
                if _should_stop(steps, stop_p99_ms, stop_error_share):
                    break
        finally:
            await load.close()
        return steps

    return asyncio.run(run_all())


def _summary(run: Run, mode: str, value: float) -> Step:
    ok = run.ok()
    shed = run.count(503) + run.count(429)
    return Step(
        mode=mode,
        value=value,
        requests=len(run.results),
        throughput_rps=round(run.goodput_rps(), 2),
        p50_ms=round(percentile_ms(ok, 50), 2),
        p90_ms=round(percentile_ms(ok, 90), 2),
        p99_ms=round(percentile_ms(ok, 99), 2),
        shed=shed,
        errors=len(run.results) - len(ok) - shed,
        generator_cpu=round(run.cpu_share, 3),
    )


def _should_stop(steps: list[Step], stop_p99_ms: float | None, stop_error_share: float) -> bool:
    last = steps[-1]
    if stop_p99_ms is not None and last.p99_ms > stop_p99_ms:
        return True
    if last.requests and (last.shed + last.errors) / last.requests > stop_error_share:
        return True
    if last.mode == "concurrency" and len(steps) >= 2:
        return last.throughput_rps < steps[-2].throughput_rps * SATURATION_GAIN
    return False


def progress_bar(k: int, n: int, step: Step, out=sys.stderr) -> None:
    """One line per step: a bar of steps done, then the step's figures."""
    bar = "#" * k + "." * (n - k)
    print(
        f"[{bar}] {step.mode} {step.value:g}: {step.throughput_rps:.1f}/s, p50 {step.p50_ms:.1f} "
        f"p90 {step.p90_ms:.1f} p99 {step.p99_ms:.1f} ms, shed {step.shed}, errors {step.errors}, "
        f"generator CPU {step.generator_cpu:.0%}",
        file=out,
        flush=True,
    )


def write_report(steps: list[Step], out: Path, title: str) -> list[Path]:
    """``out``/loadtest.csv and, with matplotlib installed, ``out``/loadtest.png."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "loadtest.csv"]
    with paths[0].open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(Step.__dataclass_fields__))
        writer.writeheader()
        writer.writerows(asdict(s) for s in steps)
    try:
        import matplotlib
    except ImportError:
        return paths
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for q, style in (("p50_ms", "o-"), ("p90_ms", "s--"), ("p99_ms", "^-")):
        ax.plot(
            [s.throughput_rps for s in steps], [getattr(s, q) for s in steps], style, label=q[:3]
        )
    for s in steps:
        ax.annotate(f"{s.value:g}", (s.throughput_rps, s.p99_ms), fontsize=7)
    ax.set(xlabel="answered requests/s", ylabel="latency ms", title=title)
    ax.legend()
    fig.tight_layout()
    paths.append(out / "loadtest.png")
    fig.savefig(paths[1], dpi=110)
    plt.close(fig)
    return paths
