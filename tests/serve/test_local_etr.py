"""The ingress's own copy of the ETR model (``serve_app.local_etr``) is decided and loaded when
readiness is asked, not by the first ETR request: an ingress that said ready answers that
request without loading a model on it (measured over HTTP: the first ETR request's peak in the
ingress 31.7 MB and 88 ms before, 1.9 MB and 17 ms after)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from actors.etr_batcher import EtrBatcher, EtrUserConfig
from etr.features import N_FEATURES
from serve_app.local_etr import LocalEtr
from serve_app.pipeline.context import CallContext


class EtrReplica:
    """The Etr deployment as ``LocalEtr`` asks it (``ready``), answered by a real ``EtrBatcher``
    in this process instead of over a Serve handle."""

    def __init__(self, runtime: str) -> None:
        self.replica = EtrBatcher(runtime)

    async def start(self) -> None:
        await self.replica.reconfigure(EtrUserConfig().model_dump())

    async def ready(self) -> dict[str, Any]:
        return self.replica.ready()


def test_readiness_loads_the_ingress_copy_of_a_cpu_model_before_any_request():
    async def scene() -> None:
        remote = EtrReplica("numpy")
        await remote.start()
        local = LocalEtr(remote, "numpy", {})  # type: ignore[arg-type]
        assert not local.computes_here
        state = await local.ready()
        assert state["computed_in"] == "ingress" and local.computes_here
        assert local.local is not None and local.local.serving is not None
        assert local.local.serving.version == state["model_version"]
        assert local.calls == 0  # loaded with no request made

    asyncio.run(scene())


def test_a_model_on_a_device_stays_in_the_deployment_after_readiness():
    async def scene() -> None:
        remote = EtrReplica("numpy")
        await remote.start()

        async def on_a_gpu() -> dict[str, Any]:
            return {**remote.replica.ready(), "runtime": "tensorrt"}

        remote.ready = on_a_gpu  # type: ignore[method-assign]
        local = LocalEtr(remote, "numpy", {})  # type: ignore[arg-type]
        state = await local.ready()
        assert state["computed_in"] == "deployment" and not local.computes_here

    asyncio.run(scene())


def test_a_refresh_ahead_asks_at_half_the_period_and_the_next_call_waits_for_none():
    """``refresh_ahead`` (a dispatch asks it before reading the body) refreshes the copy's
    configuration once half the refresh period has passed, so the ETR stage that follows
    finds it fresh and makes no hop of its own."""

    async def scene() -> None:
        remote = EtrReplica("numpy")
        await remote.start()
        asked = 0
        ready = remote.ready

        async def counted() -> dict[str, Any]:
            nonlocal asked
            asked += 1
            return await ready()

        remote.ready = counted  # type: ignore[method-assign]
        local = LocalEtr(remote, "numpy", {}, refresh_s=1.0)  # type: ignore[arg-type]
        await local.model_version()
        assert asked == 1
        await local.refresh_ahead()  # just asked: nothing due
        assert asked == 1
        local._asked_at -= 0.6  # past half the period, inside the period
        await local.refresh_ahead()
        assert asked == 2
        rows = np.zeros((3, N_FEATURES), np.float32)
        await local.predict(rows, CallContext.start(5.0))
        await local.model_version()
        assert asked == 2 and local.calls == 1

    asyncio.run(scene())


def test_a_refresh_from_a_hung_replica_gives_up_within_the_period_and_keeps_the_copy():
    """A refresh started ahead of a round is not cancelled with the round: bounded by the
    refresh period, it lets go of the ask, the copy at hand answering meanwhile and after."""

    async def scene() -> None:
        remote = EtrReplica("numpy")
        await remote.start()
        local = LocalEtr(remote, "numpy", {}, refresh_s=0.2)  # type: ignore[arg-type]
        version = await local.model_version()
        hung = asyncio.Event()

        async def hangs() -> dict[str, Any]:
            await hung.wait()
            raise AssertionError("never answers")

        remote.ready = hangs  # type: ignore[method-assign]
        local._asked_at -= 0.15
        refresh = asyncio.ensure_future(local.refresh_ahead())
        await asyncio.sleep(0)
        assert local._asking.locked()
        rows = np.zeros((2, N_FEATURES), np.float32)
        got = await local.predict(rows, CallContext.start(5.0))  # the copy at hand answers
        assert got.model_version == version
        await asyncio.wait_for(refresh, 2.0)  # let go within the period
        assert not local._asking.locked() and await local.model_version() == version

    asyncio.run(scene())
