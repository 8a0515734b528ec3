"""The cache with a real (private) Redis: sharing, TTL, versions, stampedes, outages, garbage."""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import redis

from cache import CacheStats, CircuitBreaker, L1Cache, MultiLevelCache, RedisL2, cache_key
from cache.breaker import BreakerState


def make_cache(url: str, **kw) -> MultiLevelCache:
    stats = CacheStats()
    l2 = RedisL2(url, timeout_s=0.05, breaker=CircuitBreaker(3, 0.3), stats=stats)
    return MultiLevelCache(L1Cache(1 << 20), l2, stats=stats, **kw)


def counting(value):
    calls = {"n": 0}

    async def compute():
        calls["n"] += 1
        await asyncio.sleep(0.01)
        return value

    return compute, calls


def test_two_processes_share_l2(redis_url):
    key = cache_key("etr", "1", {"order": "o-1"})
    script = textwrap.dedent(f"""
        import asyncio, numpy as np
        from cache import L1Cache, MultiLevelCache, RedisL2
        async def main():
            c = MultiLevelCache(L1Cache(1 << 20), RedisL2({redis_url!r}))
            async def compute():
                return np.array([17.5], np.float32)
            await c.get_or_compute("etr", {key!r}, compute, 30)
            await c.drain()
        asyncio.run(main())
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)

    async def read():
        c = make_cache(redis_url)
        compute, calls = counting(np.array([0.0], np.float32))
        got = await c.get_or_compute("etr", key, compute, 30)
        return got, calls["n"], c.stats

    got, n, stats = asyncio.run(read())
    assert n == 0 and float(got[0]) == 17.5 and stats.hits[("l2", "etr")] == 1


def test_ttl_expiry_and_version_isolation(redis_url):
    async def run():
        c = make_cache(redis_url, xfetch_beta=0)
        k1 = cache_key("etr", "1", {"o": 1})
        compute, calls = counting(1.0)
        await c.get_or_compute("etr", k1, compute, 0.3)
        await c.drain()
        assert redis.Redis.from_url(redis_url).exists(k1)
        await c.get_or_compute("etr", k1, compute, 0.3)
        assert calls["n"] == 1
        await asyncio.sleep(0.5)
        assert not redis.Redis.from_url(redis_url).exists(k1)
        await c.get_or_compute("etr", k1, compute, 0.3)
        assert calls["n"] == 2
        k2 = cache_key("etr", "2", {"o": 1})
        await c.get_or_compute("etr", k2, compute, 30)
        assert calls["n"] == 3 and k1 != k2

    asyncio.run(run())


def test_100_concurrent_requests_for_one_missing_key_compute_once(redis_url):
    async def run():
        c = make_cache(redis_url)
        compute, calls = counting("v")
        key = cache_key("solve", "1", {"instance": "lc101"})
        got = await asyncio.gather(
            *(c.get_or_compute("solve", key, compute, 30) for _ in range(100))
        )
        assert got == ["v"] * 100 and calls["n"] == 1

    asyncio.run(run())


def test_lease_makes_other_replicas_wait_for_the_first(redis_url):
    async def run():
        # Margins a loaded box keeps: a Redis call that timed out reads as "no lease" (fail
        # open), and a waiter gives up at the lease's end; a correct run takes ~0.1 s.
        a, b = make_cache(redis_url, lease_ms=5000), make_cache(redis_url, lease_ms=5000)
        a.l2.timeout_s = b.l2.timeout_s = 2.0
        key = cache_key("solve", "1", {"instance": "lr201"})
        n = {"a": 0, "b": 0}

        async def slow(who):
            n[who] += 1
            await asyncio.sleep(0.1)
            return who

        got = await asyncio.gather(
            a.get_or_compute("solve", key, lambda: slow("a"), 30),
            b.get_or_compute("solve", key, lambda: slow("b"), 30),
        )
        assert n["a"] + n["b"] == 1 and got[0] == got[1]

    asyncio.run(run())


def test_killing_redis_fails_nothing_and_it_comes_back(redis_server, redis_url):
    async def run():
        c = make_cache(redis_url, xfetch_beta=0)
        compute, _ = counting(1.0)
        keys = [cache_key("etr", "1", {"o": k}) for k in range(40)]
        for k in keys[:20]:
            await c.get_or_compute("etr", k, compute, 60)
        await c.drain()
        errors = 0
        for step, k in enumerate(keys * 3):
            if step == 30:
                redis_server.kill()
            try:
                c.l1.delete(k)  # force the L2 path
                await c.get_or_compute("etr", k, compute, 60)
            except Exception:
                errors += 1
        assert errors == 0
        assert c.l2.breaker.state is not BreakerState.CLOSED
        redis_server.start()
        await asyncio.sleep(0.4)  # past reset_after_s
        before = c.stats.hits[("l2", "etr")]
        c.l1.delete(keys[0])
        await c.get_or_compute("etr", keys[0], compute, 60)  # the probe closes the breaker
        await c.drain()
        c.l1.delete(keys[0])
        await c.get_or_compute("etr", keys[0], compute, 60)
        assert c.l2.breaker.state is BreakerState.CLOSED
        assert c.stats.hits[("l2", "etr")] == before + 1

    asyncio.run(run())


def test_paused_redis_never_holds_a_request_past_the_timeout(redis_server, redis_url):
    async def run():
        c = make_cache(redis_url)
        compute, _ = counting(2.0)
        redis_server.pause()
        try:
            worst = 0.0
            for k in range(20):
                t0 = time.perf_counter()
                got = await c.get_or_compute("etr", cache_key("etr", "1", {"p": k}), compute, 60)
                worst = max(worst, time.perf_counter() - t0)
                assert got == 2.0
        finally:
            redis_server.resume()
        # timeout 50 ms + the 10 ms computation + scheduling slack on a shared machine
        assert worst < 0.05 + 0.01 + 0.1

    asyncio.run(run())


def test_garbage_under_a_key_is_a_counted_miss(redis_url):
    key = cache_key("etr", "1", {"o": "garbage"})
    redis.Redis.from_url(redis_url).set(key, b"\x80\x04not-ours")

    async def run():
        c = make_cache(redis_url)
        compute, calls = counting(3.0)
        assert await c.get_or_compute("etr", key, compute, 60) == 3.0
        return calls["n"], c.stats.decode_errors

    assert run_and(run) == (1, 1)


def run_and(coro_fn):
    return asyncio.run(coro_fn())


def test_batches_use_one_mget_and_compute_only_the_missing(redis_url):
    async def run():
        c = make_cache(redis_url)
        keys = [cache_key("etr", "1", {"o": k}) for k in range(10)]
        asked = []

        async def compute_missing(idx):
            asked.append(list(idx))
            return [float(i) for i in idx]

        first = await c.get_many_or_compute("etr", keys[:6], compute_missing, 60)
        await c.drain()
        c.l1 = L1Cache(1 << 20)  # a fresh replica: only L2 holds the first six
        second = await c.get_many_or_compute("etr", keys, compute_missing, 60)
        assert first == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert second == [float(i) for i in range(10)]
        assert asked == [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9]]

    asyncio.run(run())


@pytest.mark.parametrize("remaining_s", [0.01, 0.05, 0.1])
def test_xfetch_refresh_odds_follow_the_paper(remaining_s, monkeypatch):
    """XFetch refreshes an entry with ``remaining`` seconds left and a compute time ``d`` with
    probability exp(-remaining / (d * beta)): decided on the envelope, not on a host's timing
    (the clock stands still: on a loaded host the draws took long enough for 0.01 s left to
    shrink and the odds to drift past the tolerance)."""
    import math
    from types import SimpleNamespace

    import cache.multilevel

    now = time.time()
    monkeypatch.setattr(cache.multilevel, "time", SimpleNamespace(time=lambda: now))
    c = MultiLevelCache(L1Cache(1 << 20), xfetch_beta=1.0, rng=random.Random(7))
    env = {"v": 1, "d": 0.05, "x": now + remaining_s}
    draws = 4000
    refreshed = sum(not c._fresh(env) for _ in range(draws))
    expected = math.exp(-remaining_s / 0.05)
    assert abs(refreshed / draws - expected) < 0.03, (refreshed / draws, expected)


def test_xfetch_refreshes_a_hot_key_before_it_expires(redis_url):
    class Unlucky(random.Random):  # the least likely draw: the earliest refresh
        def random(self):
            return 1e-9

    async def run():
        # 0.05 s x 1000 x -ln(1e-9) ~ 17 min early: the 30 s entry is refreshed at once
        c = make_cache(redis_url, xfetch_beta=1000.0, rng=Unlucky())
        key = cache_key("etr", "1", {"hot": 1})
        calls = {"n": 0}

        async def slow():
            calls["n"] += 1
            await asyncio.sleep(0.05)
            return calls["n"]

        t0 = time.monotonic()
        assert await c.get_or_compute("etr", key, slow, 30) == 1
        assert await c.get_or_compute("etr", key, slow, 30) == 2  # refreshed, not served
        assert time.monotonic() - t0 < 30  # long before the entry's expiry
        plain = make_cache(redis_url, xfetch_beta=0.0)
        plain_calls = {"n": 0}

        async def counted():
            plain_calls["n"] += 1
            return 5

        other = cache_key("etr", "1", {"hot": 2})
        for _ in range(3):
            assert await plain.get_or_compute("etr", other, counted, 30) == 5
        assert plain_calls["n"] == 1  # beta 0: never early

    asyncio.run(run())
