"""Benchmark the result cache: latency per level, hit ratios on Zipf traces, end-to-end gain.

    python bench/cache.py [--quick] [--json PATH] [--out DIR]

Starts its own private redis-server on a free port (loopback; never the one on 6379).
1. Latency p50 of an L1 hit, an L2 hit (L1 empty) and a miss (one ETR model call) through
   ``MultiLevelCache`` with ETR feature rows as keys.
2. Hit ratio per level on Zipf-distributed key streams (several skews), L1 holding 2% of the
   distinct keys, for both L1 policies (LRU, W-TinyLFU), with Redis as L2.
3. ``/v1/etr`` over HTTP, closed loop, with the cache on and off (two apps, same run), on a
   request stream with a 90% repeat ratio.
Writes DIR/cache.csv and DIR/cache.png.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import log, parser, write_csv

from cache import CacheStats, CircuitBreaker, L1Cache, MultiLevelCache, RedisL2, cache_key
from etr import load_artifact, load_runtime
from etr.dataset import load_deliveries
from ops import local, redis_process


def start_redis() -> tuple[redis_process.RedisProcess, str]:
    """A private redis-server (the harness's): (process, URL)."""
    if not redis_process.RedisProcess.available():
        raise SystemExit("redis-server not found (apt-get install -y redis-server)")
    server = redis_process.RedisProcess(Path(tempfile.mkdtemp())).start()
    return server, server.url


def zipf_stream(n_keys: int, length: int, skew: float, seed: int) -> np.ndarray:
    ranks = np.arange(1, n_keys + 1, dtype=np.float64)
    p = ranks**-skew
    p /= p.sum()
    return np.random.default_rng(seed).choice(n_keys, size=length, p=p)


async def level_latency(url: str, rows: np.ndarray, reps: int) -> dict[str, float]:
    rt = load_runtime(load_artifact("etr"), "onnxruntime")
    stats = CacheStats()
    cache = MultiLevelCache(
        L1Cache(64 << 20), RedisL2(url, timeout_s=0.2, stats=stats), stats=stats, xfetch_beta=0
    )
    keys = [cache_key("etr", "v1", row) for row in rows[:reps]]

    def compute_for(i: int):
        async def compute() -> float:
            return float(rt.predict(rows[i : i + 1])[0])

        return compute

    miss, l1, l2 = [], [], []
    for i, k in enumerate(keys):
        t0 = time.perf_counter()
        await cache.get_or_compute("etr", k, compute_for(i), 300)
        miss.append(time.perf_counter() - t0)
    await cache.drain()
    for i, k in enumerate(keys):
        t0 = time.perf_counter()
        await cache.get_or_compute("etr", k, compute_for(i), 300)
        l1.append(time.perf_counter() - t0)
    cache.l1 = L1Cache(64 << 20)
    for i, k in enumerate(keys):
        cache.l1.delete(k)
        t0 = time.perf_counter()
        await cache.get_or_compute("etr", k, compute_for(i), 300)
        l2.append(time.perf_counter() - t0)
        cache.l1.delete(k)
    key_us = statistics.median(
        [
            (lambda t: (cache_key("etr", "v1", r), time.perf_counter() - t)[1])(time.perf_counter())
            for r in rows[:reps]
        ]
    )
    await cache.l2.close()
    return {
        "l1_hit_us": statistics.median(l1) * 1e6,
        "l2_hit_us": statistics.median(l2) * 1e6,
        "miss_us": statistics.median(miss) * 1e6,
        "key_us": key_us * 1e6,
    }


async def hit_ratios(url: str, skews, n_keys: int, length: int) -> list[dict]:
    import redis

    out = []
    value = b"x" * 24
    entry = len(cache_key("etr", "v1", {"k": 0})) + len(value) + 96 + 40
    for skew in skews:
        stream = zipf_stream(n_keys, length, skew, seed=int(skew * 100))
        for policy in ("lru", "tinylfu"):
            redis.Redis.from_url(url).flushall()
            stats = CacheStats()
            cache = MultiLevelCache(
                L1Cache(int(0.02 * n_keys * entry), 3600, policy),
                RedisL2(url, timeout_s=0.5, breaker=CircuitBreaker(), stats=stats),
                stats=stats,
                xfetch_beta=0,
            )

            async def compute() -> bytes:
                return value

            for k in stream:
                await cache.get_or_compute("z", f"orml:z:1:{k}", compute, 3600)
            await cache.drain()
            total = len(stream)
            out.append(
                {
                    "skew": skew,
                    "policy": policy,
                    "l1_hit_ratio": stats.hits[("l1", "z")] / total,
                    "l2_hit_ratio": stats.hits[("l2", "z")] / total,
                    "miss_ratio": stats.misses["z"] / total,
                }
            )
            log(
                f"  zipf s={skew}: {policy:<7} L1 {out[-1]['l1_hit_ratio']:.3f}  "
                f"L2 {out[-1]['l2_hit_ratio']:.3f}  miss {out[-1]['miss_ratio']:.3f}"
            )
            await cache.l2.close()
    return out


def end_to_end(duration_s: float, concurrency: int) -> list[dict]:
    import httpx

    from planner import generate_round
    from serve_app.config import CacheArgs, DispatchAppArgs
    from serve_app.schemas import OrderIn

    base = local.start(num_cpus=4).http
    for name, on in (("on", True), ("off", False)):
        args = DispatchAppArgs(
            backend="numpy", etr_runtime="onnxruntime", cache=CacheArgs(enabled=on)
        )
        local.run_app(args, name=name, route_prefix=f"/{name}")
    pool = generate_round(0, 2000, seed=5).orders
    hot = [
        json.dumps(
            {
                "orders": [
                    json.loads(OrderIn.from_domain(o).model_dump_json())
                    for o in pool[k * 10 : (k + 1) * 10]
                ]
            }
        ).encode()
        for k in range(20)
    ]
    rng = np.random.default_rng(0)
    results = []
    for name in ("off", "on"):

        async def run(name=name):
            sent, done = 0, 0
            lat = []
            async with httpx.AsyncClient(base_url=base, timeout=30) as c:
                t_end = time.perf_counter() + duration_s

                async def worker():
                    nonlocal sent, done
                    while time.perf_counter() < t_end:
                        if rng.random() < 0.9:
                            body = hot[int(rng.integers(len(hot)))]
                        else:  # 10% fresh orders: a 90% hit ratio once warm
                            k = int(rng.integers(200, 2000 - 10))
                            body = json.dumps(
                                {
                                    "orders": [
                                        json.loads(OrderIn.from_domain(o).model_dump_json())
                                        for o in pool[k : k + 10]
                                    ]
                                }
                            ).encode()
                        t0 = time.perf_counter()
                        r = await c.post(
                            f"/{name}/v1/etr",
                            content=body,
                            headers={"content-type": "application/json"},
                        )
                        sent += 1
                        if r.status_code == 200:
                            done += 1
                            lat.append((time.perf_counter() - t0) * 1e3)

                await asyncio.gather(*(worker() for _ in range(concurrency)))
            return done / duration_s, float(np.median(lat)), sent - done

        rps, p50, errors = asyncio.run(run())
        results.append({"cache": name, "requests_per_s": rps, "p50_ms": p50, "errors": errors})
        log(f"  /v1/etr cache {name}: {rps:.0f} req/s, p50 {p50:.1f} ms, errors {errors}")
    local.stop()
    return results


def plot(ratios: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for policy, style in (("lru", "o--"), ("tinylfu", "o-")):
        mine = [r for r in ratios if r["policy"] == policy]
        ax.plot(
            [r["skew"] for r in mine],
            [r["l1_hit_ratio"] for r in mine],
            style,
            label=f"L1 {policy}",
        )
        ax.plot(
            [r["skew"] for r in mine],
            [r["l1_hit_ratio"] + r["l2_hit_ratio"] for r in mine],
            style,
            alpha=0.5,
            label=f"L1+L2 ({policy} L1)",
        )
    ax.set_xlabel("Zipf skew s")
    ax.set_ylabel("hit ratio")
    ax.set_title("Hit ratio by level (L1 holds 2% of the keys)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    args = parser(__doc__, "shorter streams and runs (about a minute)").parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    proc, url = start_redis()
    try:
        x, _ = load_deliveries()
        log("latency per level ...")
        lat = asyncio.run(level_latency(url, x, 200 if args.quick else 1000))
        log(f"  {lat}")
        log("hit ratios on Zipf streams ...")
        n_keys, length = (20_000, 60_000) if args.quick else (50_000, 300_000)
        ratios = asyncio.run(hit_ratios(url, (0.8, 1.0, 1.2), n_keys, length))
    finally:
        proc.kill()
    log("/v1/etr end to end, cache on vs off ...")
    e2e = end_to_end(4.0 if args.quick else 10.0, 16)

    print(f"\nlatency p50 (ETR feature rows as keys; key build {lat['key_us']:.1f} us included)")
    print(
        f"  L1 hit {lat['l1_hit_us']:.1f} us   L2 hit {lat['l2_hit_us']:.1f} us   "
        f"miss (one model call) {lat['miss_us']:.1f} us"
    )
    print(f"\nhit ratios, {n_keys} keys, {length} requests, L1 = 2% of keys")
    print(f"{'skew':>5} {'policy':>8} {'L1':>7} {'L2':>7} {'miss':>7}")
    for r in ratios:
        print(
            f"{r['skew']:>5} {r['policy']:>8} {r['l1_hit_ratio']:>7.3f} "
            f"{r['l2_hit_ratio']:>7.3f} {r['miss_ratio']:>7.3f}"
        )
    on = next(r for r in e2e if r["cache"] == "on")
    off = next(r for r in e2e if r["cache"] == "off")
    print(
        f"\n/v1/etr, 16 closed-loop clients, 10 orders per request, ~90% repeats: cache off "
        f"{off['requests_per_s']:.0f} req/s (p50 {off['p50_ms']:.1f} ms), on "
        f"{on['requests_per_s']:.0f} req/s (p50 {on['p50_ms']:.1f} ms): "
        f"{on['requests_per_s'] / off['requests_per_s']:.2f}x"
    )
    write_csv(args.out / "cache.csv", ratios)
    plot(ratios, args.out / "cache.png")
    if args.json:
        args.json.write_text(json.dumps({"latency": lat, "ratios": ratios, "e2e": e2e}, indent=2))
    log(f"wrote {args.out / 'cache.csv'} and {args.out / 'cache.png'}")


if __name__ == "__main__":
    main()
