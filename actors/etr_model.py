"""The ETR deployment: the delivery-time model behind a classed, adaptive batcher.

Requests carry ``float32[k, 39]`` feature rows, a traffic class and the time their caller
still waits. Rows queue in a ``BatchQueue`` (``actors.scheduling``); one batch runs on the
device at a time, filled online rows first, offline rows in the room left, up to
``max_batch_size`` rows. A request larger than that is split over consecutive batches (a legal
request is never refused for its size). The batcher adapts: an idle device runs whatever is
queued at once (``batch_wait_timeout_s`` 0; a lone request skips the queue entirely), and
batches grow by themselves while the device is busy, so batching costs next to nothing at low
load and pays at high load. A request whose caller
gave up (deadline passed) before any of its rows ran is dropped.

Knobs live in ``user_config`` and change at runtime through ``reconfigure`` (no restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from ray import serve

from actors.device import GuardSettings, replica_guard
from actors.errors import DeadlinePassed, DeviceUnhealthy
from actors.faults import replica_id
from actors.metrics import ModelMetrics
from actors.replica_load import ReplicaLoad
from actors.router import BUSY_ROUTER
from actors.scheduling import BatchQueue, TrafficClass
from etr import load_artifact, load_runtime
from etr.runtime import check_features

log = logging.getLogger("orml.etr")
ONLINE_RECENT_S = 1.0  # online traffic seen this recently caps the offline rows of a call


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
        0.0,
        ge=0.0,
        le=1.0,
        description="How long an idle device waits for more rows before running a batch "
        "smaller than max_batch_size, seconds. 0: at once (batches still grow while the "
        "device is busy).",
    )
    batching: bool = Field(True, description="False runs every request on its own (baseline).")
    offline_aging_s: float = Field(
        10.0, gt=0, description="An offline request waiting this long is served as online."
    )
    offline_rows_while_online: int = Field(
        32,
        ge=1,
        description="While online requests keep arriving (one in the last second), offline "
        "rows ride along in calls made for online rows, at most this many per call: a call's "
        "time grows with its rows and is not preempted, so an online request arriving during a "
        "long bulk call would wait for all of it. With no online traffic, offline batches fill "
        "max_batch_size.",
    )
    memory_budget_mb: float | None = Field(
        None,
        gt=0,
        description="Device memory this replica may use (set by `orml plan`); None: no limit.",
    )


@dataclass(eq=False)
class _Pending:
    """One request in the batcher: its rows, its answer as it fills, its caller's future."""

    features: np.ndarray
    out: np.ndarray
    future: asyncio.Future[np.ndarray]
    enqueued: float
    traffic_class: TrafficClass = TrafficClass.ONLINE
    done_rows: int = 0
    started: bool = False


# max_ongoing_requests high: requests must reach the batcher (which queues them by class and
# deadline); capped at 5, the rest wait in the caller's router, which backs off when full.
@serve.deployment(
    name="Etr",
    ray_actor_options={"num_cpus": 0.5},
    max_ongoing_requests=512,
    request_router_config=BUSY_ROUTER,
)
class EtrDeployment:
    """model_version : a version under models/etr (None = latest); runtime : see etr.select;
    guard : the replica's ``actors.device.GuardSettings`` as a dict; speed : its throughput
    relative to the reference device (the router's weight)."""

    def __init__(
        self,
        model_version: str | None = None,
        runtime: str = "auto",
        guard: dict[str, Any] | None = None,
        speed: float = 1.0,
    ) -> None:
        self.settings = GuardSettings(**(guard or {}))
        self.artifact = load_artifact("etr", model_version)
        self.runtime = load_runtime(self.artifact, runtime)  # type: ignore[arg-type]
        self.config = EtrUserConfig()
        self.metrics = ModelMetrics(f"etr-v{self.artifact.version}")
        sample = np.load(self.artifact.path / "sample_features.npy", allow_pickle=False)[:16]
        self.guard = replica_guard(
            self.runtime.device, lambda: self.runtime.predict(sample), self.settings
        )
        self.load = ReplicaLoad(
            speed=speed,
            window_s=self.settings.busy_window_s,
            stuck_after_s=self.settings.stuck_after_s,
        )
        self._queue = BatchQueue(self.config.offline_aging_s)
        self._online_at = -math.inf  # monotonic time of the last online request
        self._pending: dict[int, _Pending] = {}
        self._has_work: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._device: asyncio.Lock | None = None  # one model call at a time (created on the loop)

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
        self._queue.offline_aging_s = config.offline_aging_s

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

    async def predict(
        self,
        features: np.ndarray,
        traffic_class: str = TrafficClass.ONLINE,
        timeout_s: float = math.inf,
    ) -> np.ndarray:
        """Minutes float32[k] for features float32[k, 39].

        traffic_class : "online" rows go first; timeout_s : how long the caller still waits.
        Raises ValueError on bad rows, DeviceUnhealthy after a device fault, DeadlinePassed if
        the request expired before any of it ran.
        """
        self.guard.ensure()
        # Checked here, per request, so one caller's bad rows never fail a whole batch.
        features = check_features(np.asarray(features, np.float32), self.runtime.n_features)
        cls = TrafficClass(traffic_class)
        if cls is TrafficClass.ONLINE:
            self._online_at = time.monotonic()
        if not self.config.batching:
            return await self._run_alone(features, cls)
        if self._device is None:
            self._device = asyncio.Lock()
        if (
            not self._device.locked()
            and not len(self._queue)
            and len(features) <= self.config.max_batch_size
            and (cls is TrafficClass.ONLINE or self._offline_hold_s() == 0)
            and self.config.batch_wait_timeout_s == 0
        ):
            # An idle device and nothing waiting: run now, no hand-off to the batch loop.
            # Requests arriving meanwhile queue and go together as the next batch.
            async with self._device:
                out = await self._run_alone(features, cls)
            if len(self._queue):
                self._wake()
            return out
        now = time.monotonic()
        key = self._queue.put(len(features), cls, now, now + timeout_s)
        pending = _Pending(
            features,
            np.empty(len(features), np.float32),
            asyncio.get_running_loop().create_future(),
            now,
            cls,
        )
        self._pending[key] = pending
        self._wake()
        try:
            return await pending.future
        except asyncio.CancelledError:  # the caller went away: its rows need not run
            self._queue.remove(key)
            self._pending.pop(key, None)
            raise

    def _offline_cap(self) -> int:
        """Offline rows one call may carry now (max_batch_size with no recent online work)."""
        if time.monotonic() - self._online_at >= ONLINE_RECENT_S:
            return self.config.max_batch_size
        return min(self.config.offline_rows_while_online, self.config.max_batch_size)

    def _offline_hold_s(self) -> float:
        """How long only-offline work should wait now: while online requests keep arriving, an
        offline-only call would hold the device for its whole length from the next online
        request (calls are not preempted), so offline rows ride along with online ones instead,
        or run once online traffic has paused for ``ONLINE_RECENT_S``."""
        now = time.monotonic()
        if self._queue.has_online(now):
            return 0.0
        return max(0.0, self._online_at + ONLINE_RECENT_S - now)

    async def _run_alone(self, features: np.ndarray, cls: TrafficClass) -> np.ndarray:
        t0 = time.perf_counter()
        out = await asyncio.to_thread(self._run_model, features, cls)
        self.metrics.observe(0.0, (time.perf_counter() - t0) * 1e3, len(features))
        return out

    def _wake(self) -> None:
        if self._has_work is None:
            self._has_work = asyncio.Event()
        if self._runner is None or self._runner.done():
            self._runner = asyncio.ensure_future(self._run_batches())
        self._has_work.set()

    async def _run_batches(self) -> None:
        assert self._has_work is not None
        while True:
            await self._has_work.wait()
            self._has_work.clear()
            wait = self.config.batch_wait_timeout_s
            if wait > 0 and self._queue.rows_waiting() < self.config.max_batch_size:
                await asyncio.sleep(wait)
            while len(self._queue):
                hold = self._offline_hold_s()
                if hold > 0:  # only offline rows wait: for online ones to ride with, or a pause
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._has_work.wait(), hold)
                    self._has_work.clear()
                    continue
                try:
                    async with self._device_lock():
                        await self._run_one_batch()
                except Exception:  # never leave callers hanging on a bug in here
                    log.exception("ETR batcher failed a batch")

    def _device_lock(self) -> asyncio.Lock:
        if self._device is None:
            self._device = asyncio.Lock()
        return self._device

    async def _run_one_batch(self) -> None:
        batch = self._queue.next_batch(
            self.config.max_batch_size, time.monotonic(), max_offline_rows=self._offline_cap()
        )
        for key in batch.expired:
            pending = self._pending.pop(key, None)
            if pending is not None and not pending.future.done():
                pending.future.set_exception(DeadlinePassed(time.monotonic() - pending.enqueued))
        if not batch.slices:
            return
        parts = [self._pending[s.key].features[s.start : s.stop] for s in batch.slices]
        rows = parts[0] if len(parts) == 1 else np.concatenate(parts)
        start, started_at = time.perf_counter(), time.monotonic()
        try:
            # In a worker thread: the event loop keeps queueing the next batch meanwhile, and
            # a wedged device blocks that thread, not the health check.
            online = any(
                self._pending[s.key].traffic_class is TrafficClass.ONLINE for s in batch.slices
            )
            cls = TrafficClass.ONLINE if online else TrafficClass.OFFLINE
            out = await asyncio.to_thread(self._run_model, rows, cls)
        except Exception as exc:
            for s in batch.slices:
                self._queue.remove(s.key)
                pending = self._pending.pop(s.key, None)
                if pending is not None and not pending.future.done():
                    pending.future.set_exception(exc)
            return
        self.metrics.observe(None, (time.perf_counter() - start) * 1e3, len(rows))
        offset = 0
        for s in batch.slices:
            part, offset = out[offset : offset + s.rows], offset + s.rows
            pending = self._pending.get(s.key)
            if pending is None:  # cancelled meanwhile
                continue
            if not pending.started:
                pending.started = True
                self.metrics.observe((started_at - pending.enqueued) * 1e3, None, None)
            pending.out[s.start : s.stop] = part
            pending.done_rows += s.rows
            if pending.done_rows == len(pending.out):
                del self._pending[s.key]
                if not pending.future.done():
                    pending.future.set_result(pending.out)

    def _run_model(self, rows: np.ndarray, cls: TrafficClass = TrafficClass.ONLINE) -> np.ndarray:
        with self.load.working(cls), self.guard.watch(self.settings.watchdog_s):
            return self.runtime.to_numpy(self.runtime.predict(rows))

    def record_routing_stats(self) -> dict[str, float]:
        return self.load.routing_stats()

    def record_autoscaling_stats(self) -> dict[str, float]:
        return self.load.autoscaling_stats()

    async def check_health(self) -> None:
        if self.load.stuck():
            raise DeviceUnhealthy(self.guard.device, "busy with no call finishing (stuck)")
        await self.guard.check_and_hold(self.settings.health_hold_s)
