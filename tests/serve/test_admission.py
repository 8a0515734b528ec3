"""Admission lanes: admit, queue with a bound, shed with a retry hint, online before offline,
deadlines, release exactly once. Plain asyncio, no Ray."""

from __future__ import annotations

import asyncio

import pytest

from domain import TrafficClass
from serve_app.pipeline import CallContext, Lane, Overloaded

ON, OFF = TrafficClass.ONLINE, TrafficClass.OFFLINE


def ctx(timeout_s: float | None = 10.0, cls: TrafficClass = ON) -> CallContext:
    return CallContext.start(timeout_s, cls)


def run(coro):
    return asyncio.run(coro)


def test_admits_up_to_the_budget_then_queues_then_sheds_at_once():
    async def go():
        lane = Lane("dispatch", max_in_flight=2, max_queued=1)
        a = await lane.acquire(ctx())
        b = await lane.acquire(ctx())
        queued = asyncio.ensure_future(lane.acquire(ctx()))
        await asyncio.sleep(0)
        assert lane.in_flight == 2 and lane.waiting == 1
        with pytest.raises(Overloaded) as shed:
            await lane.acquire(ctx())
        assert shed.value.reason == "queue_full" and shed.value.retry_after_s >= 1
        a.release()
        c = await queued
        assert lane.in_flight == 2 and lane.waiting == 0
        b.release()
        c.release()
        assert lane.in_flight == 0
        assert lane.stats.admitted == 3 and lane.stats.shed["queue_full"] == 1

    run(go())


def test_a_release_counts_once():
    async def go():
        lane = Lane("x", max_in_flight=1, max_queued=0)
        p = await lane.acquire(ctx())
        p.release()
        p.release()
        assert lane.in_flight == 0
        async with await lane.acquire(ctx()):
            assert lane.in_flight == 1
        assert lane.in_flight == 0

    run(go())


def test_online_waiters_are_served_before_offline_ones():
    async def go():
        lane = Lane("x", max_in_flight=1, max_queued=10, offline_max_share=1.0)
        first = await lane.acquire(ctx())
        order: list[str] = []

        async def wait(name: str, cls: TrafficClass) -> None:
            permit = await lane.acquire(ctx(cls=cls))
            order.append(name)
            permit.release()

        tasks = [asyncio.ensure_future(wait("off1", OFF)), asyncio.ensure_future(wait("on1", ON))]
        await asyncio.sleep(0)
        tasks.append(asyncio.ensure_future(wait("on2", ON)))
        await asyncio.sleep(0)
        first.release()
        await asyncio.gather(*tasks)
        assert order == ["on1", "on2", "off1"]

    run(go())


def test_offline_holds_at_most_its_share_and_never_starts_while_online_waits():
    async def go():
        lane = Lane("x", max_in_flight=4, max_queued=10, offline_max_share=0.5)
        offline = [await lane.acquire(ctx(cls=OFF)) for _ in range(2)]
        third = asyncio.ensure_future(lane.acquire(ctx(cls=OFF)))
        await asyncio.sleep(0)
        assert not third.done()  # 2 of 4 slots is offline's share
        online = [await lane.acquire(ctx()) for _ in range(2)]  # online still gets the rest
        assert lane.in_flight == 4
        online_waiter = asyncio.ensure_future(lane.acquire(ctx()))
        await asyncio.sleep(0)
        offline[0].release()
        got = await online_waiter  # the freed slot goes to online, not the older offline
        assert not third.done()
        for p in (got, offline[1], *online):
            p.release()
        (await third).release()

    run(go())


def test_an_online_request_at_a_full_queue_displaces_the_newest_offline_one():
    async def go():
        lane = Lane("x", max_in_flight=1, max_queued=2, offline_max_share=1.0)
        running = await lane.acquire(ctx())
        old = asyncio.ensure_future(lane.acquire(ctx(cls=OFF)))
        new = asyncio.ensure_future(lane.acquire(ctx(cls=OFF)))
        await asyncio.sleep(0)
        online = asyncio.ensure_future(lane.acquire(ctx()))
        await asyncio.sleep(0)
        with pytest.raises(Overloaded) as shed:
            await new
        assert shed.value.reason == "displaced"
        running.release()
        (await online).release()
        (await old).release()

    run(go())


def test_a_queued_request_whose_deadline_passes_is_shed_and_never_admitted():
    async def go():
        lane = Lane("x", max_in_flight=1, max_queued=5)
        running = await lane.acquire(ctx())
        with pytest.raises(Overloaded) as shed:
            await lane.acquire(ctx(timeout_s=0.05))
        assert shed.value.reason == "deadline"
        assert lane.waiting == 0
        running.release()
        assert lane.stats.admitted == 1 and lane.stats.shed["deadline"] == 1

    run(go())


def test_a_request_whose_expected_wait_exceeds_its_deadline_is_shed_without_waiting():
    async def go():
        lane = Lane("x", max_in_flight=1, max_queued=10)
        for _ in range(3):  # teach the lane that a request holds its slot ~0.05 s
            p = await lane.acquire(ctx())
            await asyncio.sleep(0.05)
            p.release()
        running = await lane.acquire(ctx())
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(Overloaded) as shed:
            await lane.acquire(ctx(timeout_s=0.01))
        assert shed.value.reason == "deadline" and loop.time() - t0 < 0.01
        running.release()

    run(go())


def test_a_cancelled_waiter_leaves_the_queue():
    async def go():
        lane = Lane("x", max_in_flight=1, max_queued=5)
        running = await lane.acquire(ctx())
        waiter = asyncio.ensure_future(lane.acquire(ctx()))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert lane.waiting == 0
        running.release()
        assert lane.in_flight == 0

    run(go())


def test_bad_lane_settings_are_refused():
    with pytest.raises(ValueError, match="max_in_flight"):
        Lane("x", max_in_flight=0, max_queued=1)
