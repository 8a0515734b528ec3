"""The ETR replica's batcher, driven in-process (the deployment class without Ray): answers
equal the runtime's, oversize requests split, online first, expired requests dropped, a lone
request runs at once."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from actors.errors import DeadlinePassed
from actors.etr_model import EtrDeployment
from etr import load_artifact, load_runtime

ARTIFACT = load_artifact("etr")
RUNTIME = load_runtime(ARTIFACT, "onnxruntime")
ROWS = np.load(ARTIFACT.path / "sample_features.npy", allow_pickle=False)


@pytest.fixture
def replica():
    return EtrDeployment.func_or_class(None, "onnxruntime", {})


class Recording:
    """Wraps the replica's model call to record each batch's size and first row."""

    def __init__(self, replica, delay_s: float = 0.0) -> None:
        self.batches: list[int] = []
        self.firsts: list[np.ndarray] = []
        self.classes: list[str] = []
        inner = replica._run_model

        def run(rows, cls):
            self.batches.append(len(rows))
            self.firsts.append(rows[0].copy())
            self.classes.append(cls)
            if delay_s:
                import time

                time.sleep(delay_s)
            return inner(rows, cls)

        replica._run_model = run


def test_concurrent_requests_share_batches_and_get_their_own_answers(replica):
    rec = Recording(replica, delay_s=0.02)
    parts = [ROWS[k : k + 3] for k in range(0, 60, 3)]

    async def go():
        return await asyncio.gather(*(replica.predict(p) for p in parts))

    got = asyncio.run(go())
    for part, minutes in zip(parts, got, strict=True):
        np.testing.assert_allclose(minutes, RUNTIME.predict(part), rtol=1e-6)
    assert len(rec.batches) < len(parts)  # requests were batched
    assert max(rec.batches) <= replica.config.max_batch_size


def test_a_request_over_the_batch_size_is_split_and_answered_whole(replica):
    replica.reconfigure({"max_batch_size": 7})
    rec = Recording(replica)
    big = np.concatenate([ROWS] * 3)[:50]
    got = asyncio.run(replica.predict(big))
    np.testing.assert_allclose(got, RUNTIME.predict(big), rtol=1e-6)
    assert sum(rec.batches) == 50 and max(rec.batches) <= 7


def test_online_rows_run_before_offline_ones_that_waited(replica):
    rec = Recording(replica, delay_s=0.05)
    replica.reconfigure({"max_batch_size": 1})
    first, offline, online = ROWS[0:1], ROWS[1:2], ROWS[2:3]

    async def go():
        busy = asyncio.ensure_future(replica.predict(first))  # takes the device
        await asyncio.sleep(0.01)
        late = asyncio.ensure_future(replica.predict(offline, "offline"))
        await asyncio.sleep(0.001)
        urgent = asyncio.ensure_future(replica.predict(online, "online"))
        await asyncio.gather(busy, late, urgent)

    asyncio.run(go())
    order = [int(np.flatnonzero((ROWS[:3] == f).all(axis=1))[0]) for f in rec.firsts]
    assert order == [0, 2, 1]
    assert rec.classes == ["online", "online", "offline"]  # the replica's Busy per class
    stats = replica.record_autoscaling_stats()
    assert stats["busy_online"] > 0 and stats["busy_offline"] > 0


def test_a_request_whose_caller_gave_up_is_dropped_not_run(replica):
    rec = Recording(replica, delay_s=0.1)

    async def go():
        busy = asyncio.ensure_future(replica.predict(ROWS[:2]))
        await asyncio.sleep(0.01)
        with pytest.raises(DeadlinePassed):
            await replica.predict(ROWS[2:4], "online", 0.02)
        await busy

    asyncio.run(go())
    assert rec.batches == [2]


def test_a_lone_request_runs_at_once_and_bad_rows_are_refused(replica):
    rec = Recording(replica)
    got = asyncio.run(replica.predict(ROWS[:4], "online", math.inf))
    np.testing.assert_allclose(got, RUNTIME.predict(ROWS[:4]), rtol=1e-6)
    assert rec.batches == [4] and len(replica._queue) == 0
    with pytest.raises(ValueError, match="features"):
        asyncio.run(replica.predict(ROWS[:2, :5]))


def test_while_online_traffic_flows_offline_rows_ride_along_capped(replica):
    rec = Recording(replica)
    replica.reconfigure({"offline_rows_while_online": 32})

    async def go():
        await replica.predict(ROWS[0:1])  # online traffic is flowing
        bulk = asyncio.ensure_future(replica.predict(ROWS[1:41], "offline"))
        await asyncio.sleep(0.1)
        held = not bulk.done() and rec.batches == [1]  # no offline-only call meanwhile
        await replica.predict(ROWS[41:42])  # the next online call takes 32 offline rows along
        rode = rec.batches[1] == 1 + 32
        minutes = await bulk  # the last 8 rows run once online traffic pauses
        return held, rode, minutes

    held, rode, minutes = asyncio.run(go())
    assert held and rode
    assert rec.batches[2:] == [8] and rec.classes[2] == "offline"
    np.testing.assert_allclose(minutes, RUNTIME.predict(ROWS[1:41]), rtol=1e-6)
