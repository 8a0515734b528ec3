"""The ETR model computed in the ingress's own process, when placement puts it there.

A Serve hop costs milliseconds of CPU a request (``bench/serve_load.py`` measures it against a
no-op route), while the ETR model is a small MLP that answers a row in microseconds on the
CPU. So where the Etr replicas run a
CPU runtime, the ingress computes the model itself (``args.etr_placement: auto``, the
default; ``ingress`` / ``deployment`` force it), with the same batcher and version handling
as an Etr replica (``actors.etr_batcher.EtrBatcher``, model calls inline). On a GPU the Etr
deployment keeps the model: it owns the device.

The Etr deployment stays the owner of the model's configuration: the local copy follows it,
asking a replica once ``refresh_s`` has passed, or half of it ahead of a round (inline, as
``EtrHandle`` does) and
reconfiguring itself when the version, the warm versions or the batching knobs changed, new
versions loaded off the event loop while the old one answers. ``orml models load V`` rolls
the local copies too, within ``refresh_s``.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import numpy as np

from actors.errors import DeadlinePassed, DeviceUnhealthy, VersionNotLoaded
from actors.etr_batcher import EtrBatcher, EtrUserConfig
from etr import Prediction
from etr.select import CPU_RUNTIMES
from serve_app.handles import EtrHandle
from serve_app.pipeline.context import CallContext
from serve_app.pipeline.errors import DeadlineExceeded, InvalidInput, NotFound, Unavailable


class LocalEtr:
    """An ``EtrModel`` (``serve_app.pipeline.ports``): in this process when the Etr replicas
    run on the CPU (``placement``: "auto") or always ("ingress"), else through ``remote``.

    remote : the Etr deployment (configuration, and the model when it stays there); runtime :
    the ETR runtime to load here; guard : ``GuardSettings`` fields (the process is never ended
    on a fault here: it is the ingress)."""

    def __init__(
        self,
        remote: EtrHandle,
        runtime: str,
        guard: dict[str, Any],
        placement: str = "auto",
        refresh_s: float = 1.0,
    ) -> None:
        self.remote, self.runtime, self.placement = remote, runtime, placement
        self.refresh_s = refresh_s
        self.local: EtrBatcher | None = None
        self._guard = {**guard, "exit_on_device_fault": False, "fault_injection": False}
        self._decided = placement == "deployment"
        self._config: dict[str, Any] | None = None
        self._asked_at = -math.inf
        self._asking = asyncio.Lock()
        self.calls = 0  # model calls made here (not hops), for /admin/status

    @property
    def computes_here(self) -> bool:
        """Whether the model is computed in this process (decided at the first request or
        readiness check)."""
        return self.local is not None

    async def predict(
        self, features: np.ndarray, ctx: CallContext, version: str | None = None
    ) -> Prediction:
        await self._follow()
        if self.local is None:
            return await self.remote.predict(features, ctx, version)
        self.calls += 1
        try:
            return await self.local.predict(
                features, ctx.traffic_class.value, max(0.0, ctx.remaining_s()), version
            )
        except ValueError as exc:  # the rows' own check
            raise InvalidInput.at(("features",), str(exc)) from exc
        except VersionNotLoaded as exc:
            raise NotFound(f"ETR model {exc}") from exc
        except DeadlinePassed as exc:
            raise DeadlineExceeded(f"Etr (in the ingress): {exc}") from exc
        except DeviceUnhealthy as exc:
            raise Unavailable(f"Etr (in the ingress): {exc}") from exc

    async def model_version(self) -> str:
        await self._follow()
        if self.local is None:
            return await self.remote.model_version()
        assert self.local.serving is not None
        return self.local.serving.version

    async def refresh_ahead(self) -> None:
        if self._decided and self.local is None:
            await self.remote.refresh_ahead()
        elif self._config is not None:  # the first ask is a request's own, within its deadline
            await self._follow(self.refresh_s / 2)

    def busy(self) -> dict[str, float] | None:
        """The local model's Busy by traffic class (as an Etr replica reports it), or None
        where the model is not computed here."""
        return None if self.local is None else self.local.load.autoscaling_stats()

    async def ready(self) -> dict[str, Any]:
        """The Etr deployment's readiness, and where the model is computed. Asking decides
        that and loads the local copy (once), so an ingress that said ready answers its first
        ETR request without loading a model on it (tens of MB and a model load otherwise)."""
        await self._follow()
        state = await self.remote.ready()
        if self.local is None:
            return {**state, "computed_in": "deployment"}
        # The statistics of the model computed here (the replicas' copies stay idle).
        return {**state, "stats": self.local.ready()["stats"], "computed_in": "ingress"}

    async def _follow(self, age_s: float | None = None) -> None:
        """Decide where the model runs (once), and keep the local copy on the Etr
        deployment's configuration: asked again once the last ask is ``age_s`` old (default
        ``refresh_s``). A refresh under way is not waited for (the copy at hand answers);
        only the first call waits."""
        if self._decided and self.local is None:
            return
        age_s = self.refresh_s if age_s is None else age_s
        stale = time.monotonic() - self._asked_at > age_s
        if self._config is None or (stale and not self._asking.locked()):
            async with self._asking:
                if self._config is None or time.monotonic() - self._asked_at > age_s:
                    await self._ask()

    async def _ask(self) -> None:
        self._asked_at = time.monotonic()
        # A refresh is bounded by the refresh period, as EtrHandle's: the copy at hand answers
        # meanwhile, and a hung replica must not hold the ask for ever.
        bound = None if self._config is None else self.refresh_s
        try:
            state = await asyncio.wait_for(self.remote.ready(), bound)
        except Exception:
            if self._config is None:
                raise
            return  # keep what we have; ask again after refresh_s
        if not self._decided:
            self._decided = True
            if self.placement == "auto" and state.get("runtime") not in CPU_RUNTIMES:
                self._config = state
                return  # a device the Etr replicas own: the model stays there
            self.local = EtrBatcher(self.runtime, self._guard, inline_calls=True)
        config = {name: state[name] for name in EtrUserConfig.model_fields if name in state}
        config["model_version"] = state["model_version"]  # exactly the version they serve
        if config != self._config:
            assert self.local is not None
            await self.local.reconfigure(config)
            self._config = config
