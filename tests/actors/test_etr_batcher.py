"""The ETR replica's batcher, driven in-process (the deployment class without Ray): answers
equal the runtime's, oversize requests split, online first, expired requests dropped, a lone
request runs at once; a new model version swaps in while requests are queued, each answered
whole by the version it arrived under."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest

from actors.errors import DeadlinePassed, VersionNotLoaded
from actors.etr_batcher import EtrBatcher
from etr import load_artifact, load_runtime

ARTIFACT = load_artifact("etr")
RUNTIME = load_runtime(ARTIFACT, "onnxruntime")
ROWS = np.load(ARTIFACT.path / "sample_features.npy", allow_pickle=False)


def reconfigure(replica, config):
    asyncio.run(replica.reconfigure(config))


@pytest.fixture
def replica():
    r = EtrBatcher("onnxruntime", {})
    reconfigure(r, {})  # what Serve does after __init__
    return r


class Recording:
    """Wraps the replica's model call to record each batch's size and first row."""

    def __init__(self, replica, delay_s: float = 0.0) -> None:
        self.batches: list[int] = []
        self.firsts: list[np.ndarray] = []
        self.classes: list[str] = []
        self.versions: list[list[str]] = []
        inner = replica._run_model

        def run(calls, cls):
            self.batches.append(sum(len(rows) for _, rows in calls))
            self.firsts.append(calls[0][1][0].copy())
            self.classes.append(cls)
            self.versions.append([m.version for m, _ in calls])
            if delay_s:
                import time

                time.sleep(delay_s)
            return inner(calls, cls)

        replica._run_model = run


def test_concurrent_requests_share_batches_and_get_their_own_answers(replica):
    rec = Recording(replica, delay_s=0.02)
    parts = [ROWS[k : k + 3] for k in range(0, 60, 3)]

    async def go():
        return await asyncio.gather(*(replica.predict(p) for p in parts))

    got = asyncio.run(go())
    for part, answer in zip(parts, got, strict=True):
        np.testing.assert_allclose(answer.minutes, RUNTIME.predict(part), rtol=1e-6)
    assert len(rec.batches) < len(parts)  # requests were batched
    assert max(rec.batches) <= replica.config.max_batch_size


def test_a_request_over_the_batch_size_is_split_and_answered_whole(replica):
    reconfigure(replica, {"max_batch_size": 7})
    rec = Recording(replica)
    big = np.concatenate([ROWS] * 3)[:50]
    got = asyncio.run(replica.predict(big))
    np.testing.assert_allclose(got.minutes, RUNTIME.predict(big), rtol=1e-6)
    assert sum(rec.batches) == 50 and max(rec.batches) <= 7


def test_online_rows_run_before_offline_ones_that_waited(replica):
    rec = Recording(replica, delay_s=0.05)
    reconfigure(replica, {"max_batch_size": 1})
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
    stats = replica.load.autoscaling_stats()
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
    np.testing.assert_allclose(got.minutes, RUNTIME.predict(ROWS[:4]), rtol=1e-6)
    assert rec.batches == [4] and len(replica._queue) == 0
    with pytest.raises(ValueError, match="features"):
        asyncio.run(replica.predict(ROWS[:2, :5]))


def test_while_online_traffic_flows_offline_rows_ride_along_capped(replica):
    rec = Recording(replica)
    reconfigure(replica, {"offline_rows_while_online": 32})

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
    np.testing.assert_allclose(minutes.minutes, RUNTIME.predict(ROWS[1:41]), rtol=1e-6)


def test_short_offline_only_calls_run_beside_online_traffic_capped(replica):
    # The CPU profile says a 32-row call takes microseconds: short under a 5 ms bound.
    rec = Recording(replica)
    reconfigure(replica, {"offline_rows_while_online": 32, "offline_short_call_ms": 5})

    async def go():
        await replica.predict(ROWS[0:1])  # online traffic is flowing
        return await replica.predict(ROWS[1:41], "offline")  # no online call to ride along

    minutes = asyncio.run(go())
    assert rec.batches == [1, 32, 8] and rec.classes[1:] == ["offline", "offline"]
    np.testing.assert_allclose(minutes.minutes, RUNTIME.predict(ROWS[1:41]), rtol=1e-6)


def test_a_version_swaps_in_while_requests_wait_each_answered_by_its_own_version(replica):
    """v1 serves; requests queue behind a busy device; reconfigure loads v2 meanwhile (off the
    event loop) and swaps. Queued requests are answered by v1, later ones by v2, each whole and
    named; a batch holding both runs each group on its own model."""
    reconfigure(replica, {"model_version": "1", "max_batch_size": 64})
    v1 = load_runtime(load_artifact("etr", "1"), "onnxruntime")
    v2 = load_runtime(load_artifact("etr", "2"), "onnxruntime")
    rec = Recording(replica, delay_s=0.05)

    async def go():
        busy = asyncio.ensure_future(replica.predict(ROWS[0:4]))
        await asyncio.sleep(0.01)
        queued = [asyncio.ensure_future(replica.predict(ROWS[k : k + 3])) for k in (4, 7)]
        await asyncio.sleep(0)
        await replica.reconfigure({"model_version": "2", "max_batch_size": 64})
        later = [asyncio.ensure_future(replica.predict(ROWS[k : k + 3])) for k in (10, 13)]
        return await busy, await asyncio.gather(*queued), await asyncio.gather(*later)

    first, queued, later = asyncio.run(go())
    assert first.model_version == "1" and [a.model_version for a in queued] == ["1", "1"]
    assert [a.model_version for a in later] == ["2", "2"]
    np.testing.assert_allclose(queued[1].minutes, v1.predict(ROWS[7:10]), rtol=1e-6)
    np.testing.assert_allclose(later[0].minutes, v2.predict(ROWS[10:13]), rtol=1e-6)
    assert not np.allclose(v1.predict(ROWS[10:13]), v2.predict(ROWS[10:13]), rtol=1e-3)
    assert ["1", "2"] in rec.versions  # one batch, two groups
    assert replica.ready()["model_version"] == "2" and replica.ready()["loaded_versions"] == ["2"]


def test_warm_versions_stay_loaded_and_a_missing_version_changes_nothing(replica):
    reconfigure(replica, {"model_version": "2", "warm_versions": ["1"]})
    kept = replica.models["1"]
    reconfigure(replica, {"model_version": "1", "warm_versions": ["2"]})
    assert replica.serving is kept  # a swap, no load
    asyncio.run(replica.guard.check_and_hold(0.0))  # the probe survives the swap
    assert replica.guard.healthy
    with pytest.raises(FileNotFoundError, match="no version '9'"):
        reconfigure(replica, {"model_version": "9"})
    assert replica.serving is kept and sorted(replica.models) == ["1", "2"]


@pytest.mark.parametrize("inline_calls", [False, True])
def test_a_loaded_version_named_by_a_request_answers_it_and_counts_its_statistics(inline_calls):
    replica = EtrBatcher("onnxruntime", {}, inline_calls=inline_calls)
    reconfigure(replica, {"model_version": "2", "warm_versions": ["1"], "max_batch_size": 8})
    v1 = load_runtime(load_artifact("etr", "1"), "onnxruntime")
    parts = [ROWS[k : k + 5] for k in range(0, 30, 5)]  # 6 requests of 5 rows: calls of <= 8

    async def go():
        return await asyncio.gather(*(replica.predict(p, version="1") for p in parts))

    for part, got in zip(parts, asyncio.run(go()), strict=True):
        assert got.model_version == "1"
        np.testing.assert_allclose(got.minutes, v1.predict(part), rtol=1e-6)
    stats = replica.ready()["stats"]
    one = stats["1"]
    assert one["inference_stats"]["success"]["count"] == 6
    assert one["inference_count"] == 30  # rows
    assert sum(b["compute_infer"]["count"] for b in one["batch_stats"]) == one["execution_count"]
    assert max(b["batch_size"] for b in one["batch_stats"]) <= 8
    assert one["inference_stats"]["compute_infer"]["ns"] > 0 and one["last_inference"] > 0
    assert stats["2"]["inference_count"] == 0  # the serving version was not asked
    with pytest.raises(VersionNotLoaded, match="'3' is not loaded"):
        asyncio.run(replica.predict(ROWS[:2], version="3"))
    with pytest.raises(ValueError):
        asyncio.run(replica.predict(ROWS[:2, :5], version="1"))
    # a refused request is refused before it counts; one that fails running counts as failed
    assert replica.ready()["stats"]["1"]["inference_stats"]["fail"]["count"] == 0


def test_a_request_whose_model_call_fails_counts_as_failed(replica):
    def broken(calls, cls):
        raise RuntimeError("device lost")

    replica._run_model = broken
    with pytest.raises(RuntimeError, match="device lost"):
        asyncio.run(replica.predict(ROWS[:3]))
    stats = replica.ready()["stats"][replica.serving.version]["inference_stats"]
    assert stats["fail"]["count"] == 1 and stats["success"]["count"] == 0
