"""The served pipeline with in-process fakes for the deployments: the same plan as
``dispatch_round``, one solver hop per round, no ETR hop when every row is cached, admission
before decoding, one model version per answer while a roll moves versions under the cache.
Plain asyncio, no Ray."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cache import L1Cache, MultiLevelCache, Quantisation
from cache.codec import decode, encode
from cache.keys import cache_key
from etr import Prediction, features_from_orders, load_artifact, load_runtime
from planner import dispatch_round, generate_round
from planner.dispatch_round import solve_round
from serve_app.cache_setup import ReplicaCache
from serve_app.config import Limits
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.pipeline import (
    Admission,
    CallContext,
    EtrCall,
    Lane,
    Overloaded,
    Pipeline,
    RoundSource,
    TooLarge,
)
from serve_app.round_decoder import RoundDecoder
from serve_app.schemas import DispatchRequest

RUNTIMES = {v: load_runtime(load_artifact("etr", v), "onnxruntime") for v in ("1", "2")}
RUNTIME = RUNTIMES["1"]


class FakeSolver:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.calls, self.delay_s = 0, delay_s

    async def solve_round(self, arrays, weights, etr_floor, improve_routes, ctx):
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return solve_round(arrays, weights, etr_floor=etr_floor, improve_routes=improve_routes)


class FakeEtr:
    """Like ``serve_app.handles.EtrHandle``: the version it names is the last one that
    answered; ``serving`` is what the replicas run (a test flips it: a roll)."""

    computes_here = False  # a hop away, as the Etr deployment

    def __init__(self) -> None:
        self.calls, self.rows = 0, 0
        self.serving = self.seen = "1"

    async def predict(self, features, ctx, version=None):
        self.calls += 1
        self.rows += len(features)
        if version is not None:  # a pinned version answers, whatever serves
            return Prediction(RUNTIMES[version].predict(features), version)
        self.seen = self.serving
        return Prediction(RUNTIMES[self.serving].predict(features), self.serving)

    async def model_version(self):
        return self.seen

    async def refresh_ahead(self):
        pass


def pipeline(solver, etr, *, cache: bool = False, in_flight: int = 4, queued: int = 4):
    replica_cache = None
    if cache:
        replica_cache = ReplicaCache(
            MultiLevelCache(L1Cache(1 << 20, 60.0, "lru")),
            60.0,
            Quantisation(1e-4),
            None,
            solve_ttl_s=3600.0,
        )
    admission = Admission({n: Lane(n, in_flight, queued) for n in ("dispatch", "etr", "solve")})
    return Pipeline(
        solver=solver, etr=etr, admission=admission, limits=Limits(), cache=replica_cache
    )


def decoder(round_):
    async def decode():
        return RoundSource.of_round(round_)

    return decode


def test_the_served_plan_equals_dispatch_round_with_one_hop_each():
    round_ = generate_round(40, 15, seed=8)
    solver, etr = FakeSolver(), FakeEtr()
    plan = asyncio.run(pipeline(solver, etr).dispatch(decoder(round_), CallContext.start(10)))
    want = dispatch_round(
        round_, backend="numpy", etr_minutes=RUNTIME.predict(features_from_orders(round_.orders))
    )
    assert plan.assignments == want.assignments and plan.routes == want.routes
    assert plan.etr_arrival == pytest.approx(want.etr_arrival)
    assert (solver.calls, etr.calls) == (1, 1) and plan.etr_model_version == "1"
    assert {"admission_ms", "decode_ms", "pack_ms", "etr_ms", "solve_ms", "unpack_ms"} <= set(
        plan.timings_ms
    )


class RefreshedEtr(FakeEtr):
    """A ``FakeEtr`` whose refresh takes a hop (``hop_s``), as ``EtrHandle``'s and
    ``LocalEtr``'s do; ``events`` records when it is asked and answered."""

    def __init__(self, hop_s: float, events: list[str]) -> None:
        super().__init__()
        self.hop_s, self.events = hop_s, events

    async def refresh_ahead(self):
        self.events.append("version asked")
        await asyncio.sleep(self.hop_s)
        self.events.append("version known")


def test_the_etr_version_is_asked_for_while_the_body_is_read():
    """The version's hop runs beside the body's reading, not after it (where the ETR stage
    took 30-40 ms instead of 5-11 at 5000 x 2000 over HTTP after a quiet second)."""
    round_ = generate_round(40, 15, seed=8)
    events: list[str] = []
    etr = RefreshedEtr(0.05, events)

    async def decode():
        events.append("body read from")
        await asyncio.sleep(0.1)  # the body arriving
        events.append("body read")
        return RoundSource.of_round(round_)

    plan = asyncio.run(pipeline(FakeSolver(), etr).dispatch(decode, CallContext.start(10)))
    assert events == ["version asked", "body read from", "version known", "body read"]
    assert plan.etr_model_version == "1" and etr.calls == 1


def _planner_calls_from_the_ingress(run: Callable[[], Any]) -> list[str]:
    """The ``planner/`` functions that ``serve_app/`` code calls while ``run()`` runs, in
    order (a profile hook: every call whose nearest project caller is in ``serve_app/``)."""
    root = str(Path(__file__).resolve().parents[2]) + "/"
    calls: list[str] = []

    def hook(frame: Any, event: str, _arg: Any) -> None:
        if event != "call" or not frame.f_code.co_filename.startswith(root + "planner/"):
            return
        caller = frame.f_back
        while caller is not None and not caller.f_code.co_filename.startswith(root):
            caller = caller.f_back  # through the library frames (asyncio, functools)
        if caller is not None and caller.f_code.co_filename.startswith(root + "serve_app/"):
            calls.append(frame.f_code.co_name)

    sys.setprofile(hook)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


@pytest.mark.parametrize("source", ["json", "grpc", "handle"])
def test_the_ingress_calls_the_planner_once_a_stage(source: str):
    """The pack, the ETR floor and the plan: one call into ``planner/`` each, whatever the
    protocol read the round (the solve is the solver's: a hop away)."""
    round_ = generate_round(30, 12, seed=21)
    request = DispatchRequest.from_domain(round_)
    reader = RoundDecoder.for_limits(Limits())
    if source == "json":
        got = reader.decode(request.model_dump_json().encode())
    elif source == "grpc":
        message = pb.DispatchRequest(**request.model_dump(exclude_none=True))
        got = reader.from_message(message.SerializeToString(), request.to_source)
    else:
        got = RoundSource.of_round(round_)
    assert got is not None

    async def decode() -> RoundSource:
        return got

    p = pipeline(FakeSolver(), FakeEtr())
    calls = _planner_calls_from_the_ingress(
        lambda: asyncio.run(p.dispatch(decode, CallContext.start(30)))
    )
    assert calls == ["pack_served_round", "etr_floor_seconds", "build_plan"]


def test_a_round_whose_etr_rows_are_all_cached_makes_one_hop():
    round_ = generate_round(20, 10, seed=3)
    solver, etr = FakeSolver(), FakeEtr()
    p = pipeline(solver, etr, cache=True)

    async def twice():
        a = await p.dispatch(decoder(round_), CallContext.start(10))
        b = await p.dispatch(decoder(round_), CallContext.start(10))
        return a, b

    first, second = asyncio.run(twice())
    assert (solver.calls, etr.calls) == (2, 1)
    assert first.assignments == second.assignments
    assert second.etr_arrival == pytest.approx(first.etr_arrival)


def test_a_shed_request_is_never_decoded():
    solver, etr = FakeSolver(delay_s=0.2), FakeEtr()
    p = pipeline(solver, etr, in_flight=1, queued=0)
    decoded = 0
    round_ = generate_round(5, 2, seed=1)

    async def decode():
        nonlocal decoded
        decoded += 1
        return RoundSource.of_round(round_)

    async def burst():
        return await asyncio.gather(
            *(p.dispatch(decode, CallContext.start(10)) for _ in range(5)), return_exceptions=True
        )

    results = asyncio.run(burst())
    shed = [r for r in results if isinstance(r, Overloaded)]
    assert len(shed) == 4 and decoded == 1 and solver.calls == 1


def test_a_body_that_never_arrives_gives_its_slot_back_at_the_deadline():
    """A client that stops sending its body (its read awaits forever) holds the lane's only
    slot until its own deadline, no longer: BodyTimeout (408), and the next round runs."""
    import time

    from serve_app.error_answers import answer_for
    from serve_app.pipeline.errors import BodyTimeout

    p = pipeline(FakeSolver(), FakeEtr(), in_flight=1, queued=1)
    round_ = generate_round(5, 2, seed=1)

    async def stalled():
        await asyncio.sleep(3600)  # the rest of the body never comes

    async def body():
        return RoundSource.of_round(round_)

    async def run():
        t0 = time.perf_counter()
        slow = asyncio.ensure_future(p.dispatch(stalled, CallContext.start(0.3)))
        await asyncio.sleep(0.05)
        plan = await p.dispatch(body, CallContext.start(5))
        return slow, plan, time.perf_counter() - t0

    slow, plan, took = asyncio.run(run())
    assert isinstance(slow.exception(), BodyTimeout) and plan.assignments
    assert answer_for(slow.exception()).http_status == 408
    assert took < 2.0


def test_a_round_over_the_limits_is_too_large_naming_the_limit():
    solver, etr = FakeSolver(), FakeEtr()
    p = Pipeline(
        solver=solver,
        etr=etr,
        admission=Admission({n: Lane(n, 1, 1) for n in ("dispatch", "etr", "solve")}),
        limits=Limits(max_riders=3),
    )
    with pytest.raises(TooLarge, match="riders: 4 exceeds the limit of 3"):
        asyncio.run(p.dispatch(decoder(generate_round(4, 1, seed=1)), CallContext.start(10)))
    assert solver.calls == 0


def test_etr_rows_of_a_round_with_no_orders_cost_no_hop():
    solver, etr = FakeSolver(), FakeEtr()
    plan = asyncio.run(
        pipeline(solver, etr).dispatch(decoder(generate_round(5, 0, seed=1)), CallContext.start(10))
    )
    assert plan.assignments == () and etr.calls == 0 and solver.calls == 1
    assert plan.etr_model_version is None  # no ETR call, no version to name


def test_etr_minutes_match_the_runtime():
    round_ = generate_round(0, 9, seed=5)
    etr = FakeEtr()
    p = pipeline(FakeSolver(), etr, cache=True)
    got = asyncio.run(p.etr_features(features_from_orders(round_.orders), CallContext.start(10)))
    np.testing.assert_allclose(
        got.minutes, RUNTIME.predict(features_from_orders(round_.orders)), atol=1e-5
    )
    assert got.model_version == "1"


def test_a_roll_under_the_cache_answers_from_one_version_and_never_files_under_another():
    """Rows cached under v1; the replicas move to v2 unseen; a request with some cached rows
    and some new ones is answered whole by v2 (not v1 hits mixed with v2 rows), and no v2 value
    is ever stored under a v1 key."""
    rows = features_from_orders(generate_round(0, 12, seed=4).orders)
    etr = FakeEtr()
    p = pipeline(FakeSolver(), etr, cache=True)
    l1 = p.cache.levels.l1

    def keys(version, part):
        return [cache_key("etr", f"v{version}", r, p.cache.quant) for r in part]

    async def go():
        first = await p.etr_features(rows[:6], CallContext.start(10))
        etr.serving = "2"  # the roll: the pipeline still believes v1
        second = await p.etr_features(rows, CallContext.start(10))
        return first, second

    first, second = asyncio.run(go())
    assert first.model_version == "1" and second.model_version == "2"
    np.testing.assert_allclose(second.minutes, RUNTIMES["2"].predict(rows), atol=1e-5)
    assert all(l1.get(k) is None for k in keys("1", rows[6:]))  # v2 rows not filed as v1
    assert all(l1.get(k) is not None for k in keys("2", rows))
    for k, want in zip(keys("1", rows[:6]), RUNTIMES["1"].predict(rows[:6]), strict=True):
        assert decode(l1.get(k))["v"] == pytest.approx(float(want))


def test_a_version_named_by_the_caller_answers_and_caches_under_that_version_only():
    """v2 serves; a call pinned to v1 is answered by v1 and filed under v1's keys, and a second
    pinned call is answered from the cache."""
    rows = features_from_orders(generate_round(0, 5, seed=6).orders)
    etr = FakeEtr()
    etr.serving = etr.seen = "2"
    p = pipeline(FakeSolver(), etr, cache=True)
    l1 = p.cache.levels.l1

    async def go():
        return [await p.etr_features(rows, CallContext.start(10), "1") for _ in range(2)]

    first, second = asyncio.run(go())
    assert first.model_version == second.model_version == "1"
    np.testing.assert_allclose(second.minutes, RUNTIMES["1"].predict(rows), atol=1e-5)
    assert etr.calls == 1  # the second from the cache
    assert all(l1.get(cache_key("etr", "v1", r, p.cache.quant)) is not None for r in rows)
    assert all(l1.get(cache_key("etr", "v2", r, p.cache.quant)) is None for r in rows)


def test_every_weight_survives_the_trip_through_the_api_schema():
    from domain import DispatchWeights
    from planner import generate_round
    from serve_app.schemas import DispatchRequest

    weights = DispatchWeights(
        late_weight=7.0,
        max_lateness_s=900.0,
        max_orders_per_rider=3,
        candidate_riders=5,
        etr_floor=False,
    )
    round_ = generate_round(4, 2, seed=1, weights=weights)
    assert DispatchRequest.from_domain(round_).to_domain().weights == weights


def test_a_cached_whole_answer_is_served_only_with_one_minute_per_order(redis_url):
    """A whole ETR answer in L2 under a request's bytes with another number of minutes than
    the request has orders (a forged or colliding value) is a miss: the answer is computed."""
    import redis

    from cache import CacheStats, RedisL2

    orders = generate_round(0, 3, seed=5).orders
    p = pipeline(FakeSolver(), FakeEtr())
    stats = CacheStats()
    levels = MultiLevelCache(L1Cache(1 << 20), RedisL2(redis_url, stats=stats), stats=stats)
    p.cache = ReplicaCache(levels, 60.0, Quantisation(1e-4), None, solve_ttl_s=3600.0)
    body = b'{"orders": "the request bytes"}'
    forged = {"minutes": [1.0, 2.0], "model_version": "1"}
    key = cache_key("etr-answer", "v1", body)
    redis.Redis.from_url(redis_url).set(key, encode({"v": forged, "d": 0.0, "x": 4e9}))

    async def decode_call():
        return EtrCall(orders)

    async def raw():
        return body

    got = asyncio.run(p.etr_minutes(decode_call, CallContext.start(10), raw=raw))
    want = RUNTIME.predict(features_from_orders(orders))
    np.testing.assert_allclose(got.minutes, want, atol=1e-5)
    assert stats.rejected["etr-answer"] == 1
