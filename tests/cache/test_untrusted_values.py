"""The cache trusts nothing it reads, and stays correct when its callers go away.

Against a real (private) Redis: values written there by someone else, well-formed or not, are
counted misses and never served; with a seal, even well-formed forgeries and values copied
under another key are. Cancellation at every await of a lookup leaves neither the breaker
stuck open nor the other callers of a single flight cancelled, and a burst past the pool is
back-pressure, not a Redis failure.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import redis

from cache import CacheStats, CircuitBreaker, L1Cache, MultiLevelCache, RedisL2, cache_key
from cache.breaker import BreakerState
from cache.codec import encode
from cache.seal import Seal
from planner.pdptw.instance import load_instance
from serve_app.pipeline.cached_values import etr_answer_check, is_minutes, solution_check

from .test_multilevel import counting

SECRET = b"a shared secret of 32 bytes, ok!"


def make(url: str, *, seal: Seal | None = None, timeout_s: float = 2.0, **l2_kw) -> MultiLevelCache:
    """A cache on the private Redis. The timeout is generous (a loaded 2-core CI host can hold
    a first connect past 0.2 s, and a timed-out read is a miss, not a rejected value), except
    where a test is about the timeout."""
    stats = CacheStats()
    l2 = RedisL2(url, timeout_s=timeout_s, breaker=CircuitBreaker(3, 0.3), stats=stats, **l2_kw)
    return MultiLevelCache(L1Cache(1 << 20), l2, stats=stats, xfetch_beta=0, seal=seal)


def envelope(value, **fields) -> bytes:
    return encode({"v": value, "d": 0.01, "x": 4_000_000_000.0, **fields})


# ---- values of the wrong type, shape or range -----------------------------------------------
POISON = {
    "expiry that is text": encode({"v": 12.0, "d": 0.01, "x": "soon"}),
    "compute time that is a list": encode({"v": 12.0, "d": [1], "x": 4e9}),
    "a string for minutes": envelope("pwned"),
    "a billion minutes": envelope(1e9),
    "negative minutes": envelope(-5.0),
    "a bool for minutes": envelope(True),
    "not an envelope": encode([1, 2, 3]),
    "not ours at all": b"\x80\x04not-ours",
}


@pytest.mark.parametrize("name", sorted(POISON))
def test_a_poisoned_etr_row_is_a_counted_miss_never_served(redis_url, name):
    key = cache_key("etr", "v1", {"row": name})
    redis.Redis.from_url(redis_url).set(key, POISON[name])

    async def run():
        c = make(redis_url)
        compute, calls = counting([31.5])
        got = await c.get_many_or_compute(
            "etr", [key], lambda idx: compute(), 60, validate=is_minutes
        )
        return got, calls["n"], c.stats.rejected["etr"]

    assert asyncio.run(run()) == ([31.5], 1, 1)


def test_a_poisoned_whole_answer_is_a_miss(redis_url):
    """The /v1/etr whole-answer cache: the wrong version, a string, a minute count other than
    the request's order count."""
    check = etr_answer_check("1", orders=2)
    assert check({"minutes": [12.5, 30.0], "model_version": "1"})
    for bad in (
        {"minutes": [12.5, 30.0], "model_version": "2"},
        {"minutes": "pwned", "model_version": "1"},
        {"minutes": [1.0] * 3, "model_version": "1"},
        {"minutes": [12.5], "model_version": "1"},
        {"minutes": [float("nan"), 1.0], "model_version": "1"},
        {"minutes": [1.0, 1.0], "model_version": "1", "extra": 1},
        "pwned",
    ):
        assert not check(bad), bad


def test_a_cached_solution_is_re_evaluated_against_its_instance():
    inst = load_instance(Path(__file__).resolve().parents[2] / "data/pdptw/instances/lc101.txt")
    from planner.pdptw.evaluate import evaluate
    from planner.pdptw.solve import solve

    sol = solve(inst, time_limit_s=0.05, seed=0)
    ev = evaluate(inst, sol.routes)
    good = {
        "instance": inst.name,
        "vehicles": ev.vehicles,
        "distance": ev.distance,
        "feasible": ev.feasible,
        "seconds": sol.seconds,
        "routes": sol.routes,
        "unassigned": [],
    }
    check = solution_check(inst)
    assert check(good)
    forged = [
        {**good, "feasible": not good["feasible"]},
        {**good, "distance": good["distance"] * 0.5},
        {**good, "vehicles": good["vehicles"] - 1},
        {**good, "routes": [[*good["routes"][0], 10000], *good["routes"][1:]]},
        {**good, "routes": [good["routes"][0]] + good["routes"]},  # a route twice
        {**good, "routes": [["1"]]},
        {**good, "seconds": -1},
        {k: v for k, v in good.items() if k != "unassigned"},
    ]
    for bad in forged:
        assert not check(bad)


# ---- a seal ----------------------------------------------------------------------------------
def test_with_a_seal_forgeries_and_copies_under_other_keys_are_misses(redis_url):
    seal = Seal(SECRET)
    k1, k2 = cache_key("etr", "v1", {"o": 1}), cache_key("etr", "v1", {"o": 2})
    r = redis.Redis.from_url(redis_url)

    async def run():
        writer = make(redis_url, seal=seal)
        compute, _ = counting([20.0])
        await writer.get_many_or_compute("etr", [k1], lambda idx: compute(), 60, is_minutes)
        await writer.drain()
        r.set(k2, r.get(k1))  # a genuine sealed value copied under another key
        reader = make(redis_url, seal=seal)
        compute2, calls = counting([21.0])
        got1 = await reader.get_many_or_compute("etr", [k1], lambda idx: compute2(), 60)
        got2 = await reader.get_many_or_compute("etr", [k2], lambda idx: compute2(), 60)
        r.set(k1, envelope(22.0))  # well-formed, in range, but not sealed
        fresh = make(redis_url, seal=seal)
        got3 = await fresh.get_many_or_compute("etr", [k1], lambda idx: compute2(), 60)
        return got1, got2, got3, calls["n"], reader.stats.rejected["etr"]

    got1, got2, got3, computed, rejected = asyncio.run(run())
    assert got1 == [20.0]  # the sealed value, read back
    assert got2 == [21.0] and got3 == [21.0] and computed == 2 and rejected == 1
    with pytest.raises(ValueError):
        Seal(b"short")


# ---- cancellation at every await --------------------------------------------------------------
def test_a_cancelled_half_open_probe_does_not_leave_the_breaker_open(redis_server, redis_url):
    """The probe after an outage is cancelled (its request went away) while Redis answers
    slowly: the breaker must let the next call probe, and close once Redis is back."""

    async def run():
        c = make(redis_url)
        key = cache_key("etr", "v1", {"b": 1})
        for _ in range(3):
            c.l2.breaker.failure()
        assert c.l2.breaker.state is BreakerState.OPEN
        await asyncio.sleep(0.35)  # half-open from now on
        redis_server.pause()
        try:
            probe = asyncio.ensure_future(c.l2.get_many([key]))
            await asyncio.sleep(0.05)
            probe.cancel()
            with pytest.raises(asyncio.CancelledError):
                await probe
        finally:
            redis_server.resume()
        assert c.l2.breaker.allow()  # the next call may probe again
        c.l2.breaker.release()
        await c.l2.get_many([key])
        return c.l2.breaker.state

    assert asyncio.run(run()) is BreakerState.CLOSED


@pytest.mark.parametrize("where", ["l2_read", "compute"])
def test_a_cancelled_caller_does_not_cancel_the_others_of_its_single_flight(redis_url, where):
    """Ten callers share one computation; the first one (whose call started it) is cancelled
    while it waits on Redis or on the computation: the other nine still get the value, and it
    is computed once."""

    async def run():
        c = make(redis_url)
        key = cache_key("solve", "2", {"i": where})
        started = asyncio.Event()
        calls = {"n": 0}

        async def slow():
            calls["n"] += 1
            started.set()
            await asyncio.sleep(0.2)
            return "solution"

        first = asyncio.ensure_future(c.get_or_compute("solve", key, slow, 60))
        if where == "compute":
            await started.wait()
        else:
            await asyncio.sleep(0)  # it is in its L2 read now
        others = [asyncio.ensure_future(c.get_or_compute("solve", key, slow, 60)) for _ in range(9)]
        await asyncio.sleep(0)
        first.cancel()
        got = await asyncio.gather(*others)
        with pytest.raises(asyncio.CancelledError):
            await first
        return got, calls["n"]

    got, computed = asyncio.run(run())
    assert got == ["solution"] * 9 and computed == 1


def test_a_batch_whose_only_caller_is_cancelled_stops_computing(redis_url):
    async def run():
        c = make(redis_url)
        keys = [cache_key("etr", "v1", {"c": k}) for k in range(3)]
        finished = asyncio.Event()

        async def compute(idx):
            await asyncio.sleep(0.3)
            finished.set()
            return [1.0] * len(idx)

        caller = asyncio.ensure_future(c.get_many_or_compute("etr", keys, compute, 60))
        await asyncio.sleep(0.05)
        caller.cancel()
        with pytest.raises(asyncio.CancelledError):
            await caller
        await asyncio.sleep(0.4)
        return finished.is_set(), dict(c._inflight)

    finished, inflight = asyncio.run(run())
    assert not finished and inflight == {}


def test_a_batch_cancelled_caller_leaves_the_computation_to_a_follower(redis_url):
    async def run():
        c = make(redis_url)
        keys = [cache_key("etr", "v1", {"f": k}) for k in range(3)]

        async def compute(idx):
            await asyncio.sleep(0.2)
            return [float(i) for i in idx]

        leader = asyncio.ensure_future(c.get_many_or_compute("etr", keys, compute, 60))
        await asyncio.sleep(0.05)
        follower = asyncio.ensure_future(c.get_many_or_compute("etr", keys[1:], compute, 60))
        await asyncio.sleep(0.01)
        leader.cancel()
        return await follower

    assert asyncio.run(run()) == [1.0, 2.0]


# ---- a burst past the pool --------------------------------------------------------------------
def test_a_burst_past_the_pool_is_back_pressure_not_a_redis_failure(redis_url):
    """3000 lookups at once through 2 connections, more than they serve within the 0.2 s
    timeout: the first wait their turn, the rest miss, counted as pool_busy; Redis is not taken
    for failing and stays in use.

    The connections are opened first: opening one is several round trips (connect, HELLO,
    CLIENT SETINFO), which a loaded 2-core host can stretch past the timeout, and a timed-out
    connect *is* a Redis failure. The burst is about the pool."""

    async def run():
        c = make(redis_url, timeout_s=0.2, max_connections=2)
        for _ in range(20):  # until both open within the timeout (the breaker cools 0.3 s)
            before = c.stats.redis_errors
            warm = [cache_key("etr", "v1", {"warm": k}) for k in range(2)]
            await asyncio.gather(*(c.l2.get_many([k]) for k in warm))
            if c.stats.redis_errors == before and c.l2.breaker.state is BreakerState.CLOSED:
                break
            await asyncio.sleep(0.35)
        before, busy_before = c.stats.redis_errors, c.stats.pool_busy
        keys = [cache_key("etr", "v1", {"p": k}) for k in range(3000)]
        await asyncio.gather(*(c.l2.get_many([k]) for k in keys))
        busy = c.stats.pool_busy - busy_before
        return c.stats.redis_errors - before, busy, c.l2.breaker.state

    errors, busy, state = asyncio.run(run())
    print(f"pool_busy {busy} of 3000")
    assert 0 < busy < 3000
    assert errors == 0 and state is BreakerState.CLOSED


def test_a_value_read_from_redis_never_outlives_the_configured_ttl(redis_url):
    """An envelope claiming to live until 2096 is kept (in L1 and as fresh) for ttl_s at
    most: a forged expiry cannot pin a value."""
    key = cache_key("etr", "v1", {"row": "long-lived"})
    redis.Redis.from_url(redis_url).set(key, envelope(31.5))

    async def run():
        c = make(redis_url)
        compute, calls = counting([12.0])
        got = await c.get_many_or_compute(
            "etr", [key], lambda idx: compute(), 60, validate=is_minutes
        )
        return c, got, calls["n"]

    c, got, computed = asyncio.run(run())
    assert (got, computed) == ([31.5], 0)
    _, expires = c.l1._main.get(key) or c.l1._window[key]
    assert expires <= c.l1.clock() + 60.0 + 1e-6
