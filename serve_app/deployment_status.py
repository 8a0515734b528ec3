"""What the deployments behind the ingress say of themselves: whether to send traffic here
(``/readyz``, the Open Inference Protocol's readiness), the ETR model's versions, and the
whole state for operators (``/admin/status``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from serve_app.pipeline.errors import Unavailable

log = logging.getLogger("orml.serve")


class ReportsReady(Protocol):
    async def ready(self) -> dict[str, Any]: ...


class DeploymentStatus:
    """solver, etr : what answers ``ready()`` for each deployment (its state as a dict);
    timeout_s : how long both may take to answer; round_reader : the state of this ingress's
    compiled round codecs (``codecs.state``: "loading", "loaded" or "failed:
    ..."); a replica is not ready while it loads, as the solver not while its kernels do."""

    def __init__(
        self,
        solver: ReportsReady,
        etr: ReportsReady,
        timeout_s: float,
        round_reader: Callable[[], str] = lambda: "loaded",
    ) -> None:
        self.solver, self.etr, self.timeout_s = solver, etr, timeout_s
        self.round_reader = round_reader

    async def states(self) -> dict[str, Any]:
        """Both deployments' ``ready()`` answers, or a short reason (details only logged)."""
        try:
            or_state, etr_state = await asyncio.wait_for(
                asyncio.gather(self.solver.ready(), self.etr.ready()), self.timeout_s
            )
        except TimeoutError:
            return {"reason": f"a deployment did not answer in {self.timeout_s} s"}
        except Exception as exc:
            log.warning("readiness: a deployment could not answer", exc_info=exc)
            return {"reason": f"a deployment could not answer ({type(exc).__name__})"}
        return {"or_solver": or_state, "etr": etr_state}

    async def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, why): each deployment's health, the solver's warm-up, the serving ETR
        versions and this ingress's readers; no configuration (that is ``states``)."""
        state = await self.states()
        if "reason" in state:
            return False, {"ready": False, **state}
        or_state, etr_state = state["or_solver"], state["etr"]
        reader = self.round_reader()
        ready = bool(
            or_state["healthy"]
            and not or_state["kernel_warming"]
            and etr_state["healthy"]
            and reader != "loading"
        )
        return ready, {
            "ready": ready,
            "ingress": {"round_reader": reader},
            "or_solver": {
                k: or_state.get(k) for k in ("healthy", "kernel_warming", "kernel_stage")
            },
            "etr": {k: etr_state[k] for k in ("healthy", "model_version", "loaded_versions")},
        }

    async def ready(self) -> bool:
        return (await self.readiness())[0]

    async def etr_model(self) -> EtrModelState:
        """The ETR model as the Etr deployment describes it; Unavailable while the
        deployments' state cannot be read."""
        state = await self.states()
        if "reason" in state:
            raise Unavailable(state["reason"])
        etr = state["etr"]
        return EtrModelState(
            versions=tuple(str(v) for v in etr.get("loaded_versions") or [etr["model_version"]]),
            serving=str(etr["model_version"]),
            runtime=str(etr.get("runtime", "onnxruntime")),
            ready=bool(etr["healthy"]),
            max_batch_size=int(etr.get("max_batch_size", 1)),
            batch_wait_timeout_s=float(etr.get("batch_wait_timeout_s", 0.0)),
            batching=bool(etr.get("batching", True)),
            stats={str(v): d for v, d in (etr.get("stats") or {}).items()},
        )


@dataclass(frozen=True)
class EtrModelState:
    """What the Etr deployment says of its model. versions : loaded, sorted; serving : the
    version that answers a request naming none; runtime : ``etr.runtime`` name; ready : its
    health; max_batch_size, batch_wait_timeout_s, batching : its batcher's knobs (rows per
    model call, seconds); stats : per loaded version, ``actors.model_stats.ModelStats``
    as a dict (the process that computes the model: this ingress, or the replica that
    answered)."""

    versions: tuple[str, ...]
    serving: str
    runtime: str
    ready: bool
    max_batch_size: int
    batch_wait_timeout_s: float
    batching: bool
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
