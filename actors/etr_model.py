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
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from ray import serve

from actors.device import DeviceGuard
from actors.metrics import ModelMetrics
from etr import load_artifact, load_runtime
from etr.runtime import check_features


class EtrUserConfig(BaseModel):
    """Runtime knobs of the ETR deployment (Serve ``user_config``)."""

    model_config = ConfigDict(extra="forbid")
    max_batch_size: int = Field(256, ge=1, le=65536, description="Rows per model call, at most.")
    batch_wait_timeout_s: float = Field(
        0.002, ge=0.0, le=1.0, description="How long a batch waits to fill, seconds."
    )
    batching: bool = Field(True, description="False runs every request on its own (baseline).")


@serve.deployment(name="Etr", ray_actor_options={"num_cpus": 0.5})
class EtrDeployment:
    """model_version : a version under models/etr (None = latest); runtime : see etr.select."""

    def __init__(self, model_version: str | None = None, runtime: str = "auto") -> None:
        self.artifact = load_artifact("etr", model_version)
        self.runtime = load_runtime(self.artifact, runtime)  # type: ignore[arg-type]
        self.config = EtrUserConfig()
        self.metrics = ModelMetrics(f"etr-v{self.artifact.version}")
        sample = np.load(self.artifact.path / "sample_features.npy", allow_pickle=False)[:16]
        self.guard = DeviceGuard(self.runtime.device, lambda: self.runtime.predict(sample))
        self.guard.arm()

    def reconfigure(self, user_config: dict[str, Any]) -> None:
        """Apply ``user_config``; raises pydantic.ValidationError naming a bad field."""
        self.config = EtrUserConfig(**user_config)
        self._batched.set_max_batch_size(self.config.max_batch_size)
        self._batched.set_batch_wait_timeout_s(self.config.batch_wait_timeout_s)

    def ready(self) -> dict[str, Any]:
        return {
            "model_version": self.artifact.version,
            "runtime": self.runtime.name,
            "healthy": self.guard.healthy,
            **self.config.model_dump(),
        }

    async def predict(self, features: np.ndarray) -> np.ndarray:
        """Minutes float32[k] for features float32[k, 39]; ValueError on bad input."""
        self.guard.ensure()
        features = np.asarray(features, np.float32)
        # Check here, per request, so one caller's bad rows never fail a whole batch.
        features = check_features(features, self.runtime.n_features)
        if not self.config.batching:
            t0 = time.perf_counter()
            out = self.runtime.to_numpy(self.runtime.predict(features))
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
        out = self.runtime.to_numpy(self.runtime.predict(rows))
        done = time.perf_counter()
        for enqueued, _ in items:
            self.metrics.observe((start - enqueued) * 1e3, None, None)
        self.metrics.observe(None, (done - start) * 1e3, len(rows))
        bounds = np.cumsum([0] + [len(f) for _, f in items])
        await asyncio.sleep(0)
        return [out[a:b] for a, b in itertools.pairwise(bounds)]

    def check_health(self) -> None:
        self.guard.check()
