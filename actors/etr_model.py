"""The ETR deployment: the delivery-time model behind dynamic batching.

Requests carry ``float32[k, 39]`` feature rows; ``@serve.batch`` gathers requests until the
batch holds ``max_batch_size`` rows or ``batch_wait_timeout_s`` passes, runs the model once and
hands each caller its slice. Both knobs live in ``user_config`` and change at runtime through
``reconfigure`` (no restart).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from ray import serve

from actors.device import replica_guard
from actors.faults import replica_id
from actors.metrics import ModelMetrics
from etr import load_artifact, load_runtime
from etr.runtime import check_features


def enforce_memory_budget(device: str, runtime: str, max_batch: int, budget_mb: float) -> None:
    """Refuse a batch size whose profiled memory exceeds the budget; cap CuPy's pool on a GPU.

    The need is the replica's profile (``placement.profiles``: measured for this device and
    runtime, else the scaled estimate) at ``max_batch`` rows. Raises ValueError naming both
    numbers, which fails the deployment's reconfigure with that message.
    """
    from placement.inventory import local_gpu_type
    from placement.profiles import ProfileSet

    root = Path(__file__).resolve().parents[1] / "profiles"
    device_type = "CPU-2core" if device == "cpu" else local_gpu_type()
    need = ProfileSet.load(root).get("etr", device_type).memory_mb(max_batch)
    if need > budget_mb:
        raise ValueError(
            f"max_batch_size {max_batch} needs {need:.0f} MiB on {device_type}, over the "
            f"memory_budget_mb {budget_mb:.0f}"
        )
    if device.startswith("cuda"):
        import cupy

        cupy.get_default_memory_pool().set_limit(size=int(budget_mb * 2**20))


class EtrUserConfig(BaseModel):
    """Runtime knobs of the ETR deployment (Serve ``user_config``)."""

    model_config = ConfigDict(extra="forbid")
    max_batch_size: int = Field(256, ge=1, le=65536, description="Rows per model call, at most.")
    batch_wait_timeout_s: float = Field(
        0.002, ge=0.0, le=1.0, description="How long a batch waits to fill, seconds."
    )
    batching: bool = Field(True, description="False runs every request on its own (baseline).")
    memory_budget_mb: float | None = Field(
        None,
        gt=0,
        description="Device memory this replica may use (set by `orml plan`); None: no limit.",
    )


@serve.deployment(name="Etr", ray_actor_options={"num_cpus": 0.5})
class EtrDeployment:
    """model_version : a version under models/etr (None = latest); runtime : see etr.select.

    watchdog_s : a model call still running after this long marks the replica unhealthy;
    exit_on_device_fault : end the process once the device failed (``actors.device.exit_soon``);
    health_hold_s : a health check waits this long unless the device fails meanwhile;
    fault_injection : accept ``inject_fault`` (drills only).
    """

    def __init__(
        self,
        model_version: str | None = None,
        runtime: str = "auto",
        watchdog_s: float = 10.0,
        probe_timeout_s: float = 1.0,
        exit_on_device_fault: bool = True,
        health_hold_s: float = 0.0,
        fault_injection: bool = False,
    ) -> None:
        self.artifact = load_artifact("etr", model_version)
        self.runtime = load_runtime(self.artifact, runtime)  # type: ignore[arg-type]
        self.config = EtrUserConfig()
        self.metrics = ModelMetrics(f"etr-v{self.artifact.version}")
        self.watchdog_s = watchdog_s
        sample = np.load(self.artifact.path / "sample_features.npy", allow_pickle=False)[:16]
        self.health_hold_s = health_hold_s
        self.guard = replica_guard(
            self.runtime.device,
            lambda: self.runtime.predict(sample),
            probe_timeout_s=probe_timeout_s,
            exit_on_device_fault=exit_on_device_fault,
            fault_injection=fault_injection,
        )

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """Apply ``user_config``; raises pydantic.ValidationError naming a bad field."""
        config = EtrUserConfig(**user_config)
        if config.memory_budget_mb is not None:
            enforce_memory_budget(
                self.runtime.device,
                self.runtime.name,
                config.max_batch_size,
                config.memory_budget_mb,
            )
        self.config = config
        self._batched.set_max_batch_size(self.config.max_batch_size)
        self._batched.set_batch_wait_timeout_s(self.config.batch_wait_timeout_s)

    def ready(self) -> dict[str, Any]:
        return {
            "model_version": self.artifact.version,
            "runtime": self.runtime.name,
            "replica": replica_id(),
            "healthy": self.guard.healthy,
            "reason": self.guard.reason,
            **self.config.model_dump(),
        }

    def inject_fault(self, kind: str) -> dict[str, Any]:
        """Drills only (see ``actors.faults``); FaultInjectionDisabled unless deployed with it."""
        return {"replica": replica_id(), "at": self.guard.faults.inject(kind)}

    def _run_model(self, rows: np.ndarray) -> np.ndarray:
        with self.guard.watch(self.watchdog_s):
            return self.runtime.to_numpy(self.runtime.predict(rows))

    async def predict(self, features: np.ndarray) -> np.ndarray:
        """Minutes float32[k] for features float32[k, 39]; ValueError on bad input."""
        self.guard.ensure()
        features = np.asarray(features, np.float32)
        # Check here, per request, so one caller's bad rows never fail a whole batch.
        features = check_features(features, self.runtime.n_features)
        if not self.config.batching:
            t0 = time.perf_counter()
            out = await asyncio.to_thread(self._run_model, features)
            self.metrics.observe(0.0, (time.perf_counter() - t0) * 1e3, len(features))
            return out
        return await self._batched((time.perf_counter(), features))

    @serve.batch(
        max_batch_size=256,
        batch_wait_timeout_s=0.002,
        batch_size_fn=lambda b: sum(len(item[1]) for item in b),
    )
    async def _batched(self, items: list[tuple[float, np.ndarray]]) -> list[np.ndarray]:
        start = time.perf_counter()
        rows = np.concatenate([f for _, f in items])
        # In a worker thread: the event loop keeps gathering the next batch meanwhile, and a
        # wedged device blocks that thread, not the health check.
        out = await asyncio.to_thread(self._run_model, rows)
        done = time.perf_counter()
        for enqueued, _ in items:
            self.metrics.observe((start - enqueued) * 1e3, None, None)
        self.metrics.observe(None, (done - start) * 1e3, len(rows))
        bounds = np.cumsum([0] + [len(f) for _, f in items])
        return [out[a:b] for a, b in itertools.pairwise(bounds)]

    async def check_health(self) -> None:
        await self.guard.check_and_hold(self.health_hold_s)
