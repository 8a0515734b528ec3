"""The delivery-time model behind a classed, adaptive batcher (``EtrBatcher``).

Requests carry ``float32[k, 39]`` feature rows, a traffic class and the time their caller
still waits. Rows queue in a ``BatchQueue`` (``actors.scheduling``); one batch runs on the
device at a time, filled online rows first, offline rows in the room left, up to
``max_batch_size`` rows. A request larger than that is split over consecutive batches (a legal
request is never refused for its size). The batcher adapts: an idle device runs whatever is
queued at once (``batch_wait_timeout_s`` 0; a lone request skips the queue entirely), and
batches grow by themselves while the device is busy, so batching costs next to nothing at low
load and pays at high load. A request whose caller
gave up (deadline passed) before any of its rows ran is dropped.

Knobs live in ``user_config`` and change at runtime through ``reconfigure`` (no restart),
the model version among them (Triton's explicit model control, by configuration): a new
version is loaded and warmed off the event loop while the old one keeps answering, then
swapped in at once. A request is answered whole by the version serving when it arrived, and
its answer names that version (``etr.Prediction``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from actors.device import GuardSettings, replica_guard
from actors.errors import DeadlinePassed, VersionNotLoaded
from actors.faults import replica_id
from actors.model_metrics import ModelMetrics
from actors.model_stats import ModelStats
from actors.replica_load import ReplicaLoad
from actors.scheduling import BatchQueue, OfflinePacing
from domain import TrafficClass
from etr import Prediction, load_artifact, load_runtime, versions
from etr.runtime import EtrRuntime, check_features

if TYPE_CHECKING:
    from devices.profiles import ModelProfile

log = logging.getLogger("orml.etr")


def etr_profile(device: str) -> tuple[str, ModelProfile]:
    """This device's type ("cpu" or "cuda:<n>") and its ETR profile (``devices.profiles``:
    measured, else the scaled estimate)."""
    from devices.catalog import local_gpu_type
    from devices.profiles import ProfileSet

    root = Path(__file__).resolve().parents[1] / "profiles"
    device_type = "CPU-2core" if device == "cpu" else local_gpu_type()
    return device_type, ProfileSet.load(root).get("etr", device_type)


def enforce_memory_budget(device: str, max_batch: int, budget_mb: float) -> None:
    """Refuse a batch size whose profiled memory exceeds the budget; cap CuPy's pool on a GPU.

    device : "cpu" or "cuda:<n>". The need is the ETR profile of this device's type at
    ``max_batch`` rows. Raises ValueError naming both numbers, which fails the deployment's
    reconfigure with that message.
    """
    device_type, profile = etr_profile(device)
    need = profile.memory_mb(max_batch)
    if need > budget_mb:
        raise ValueError(
            f"max_batch_size {max_batch} needs {need:.0f} MiB on {device_type}, over the "
            f"memory_budget_mb {budget_mb:.0f}"
        )
    if device.startswith("cuda"):
        import cupy

        cupy.get_default_memory_pool().set_limit(size=int(budget_mb * 2**20))


def profiled_call_s(device: str, rows: int) -> float:
    """Seconds one call of ``rows`` rows takes on this device by its ETR profile (p50); inf
    when there is none."""
    try:
        return etr_profile(device)[1].latency_ms(rows, "p50") / 1e3
    except (KeyError, LookupError, OSError, ValueError, RuntimeError):
        return math.inf


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
        10.0,
        gt=0,
        description="An offline request waiting this long is served as online, a batch per "
        "turn among the online requests (never all of it ahead of them).",
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
    offline_short_call_ms: float = Field(
        0.0,
        ge=0,
        le=10_000,
        description="An offline-only call of offline_rows_while_online rows that this device's "
        "profile says takes at most this long runs while online traffic flows, instead of "
        "waiting for a pause (an online request then waits that long at most). 0: always wait.",
    )
    memory_budget_mb: float | None = Field(
        None,
        gt=0,
        description="Device memory this replica may use (set by `orml plan`); None: no limit.",
    )
    model_version: str | None = Field(
        None,
        min_length=1,
        description="The version under models/etr that answers. None: the newest there when "
        "the replica loads (pin it in production: a replica started later could load a newer "
        "one). Changing it rolls the replicas without restarting them (`orml models load`).",
    )
    warm_versions: list[str] = Field(
        default_factory=list,
        description="Versions kept loaded besides model_version, so that rolling to one of "
        "them is a swap with no load (`orml models load` keeps the version it replaces).",
    )


@dataclass(frozen=True, eq=False)
class LoadedModel:
    """One model version loaded on this replica's device; sample : float32[16, 39] rows for
    warm-up and the device probe; reference : float32[16], its minutes for them at load."""

    version: str
    runtime: EtrRuntime
    sample: np.ndarray
    reference: np.ndarray
    metrics: ModelMetrics
    stats: ModelStats = field(default_factory=ModelStats)


def load_model(version: str | None, runtime: str) -> LoadedModel:
    """Load and warm one version (blocking: seconds for a TensorRT engine, run it off the event
    loop). Raises FileNotFoundError for a missing version, ValueError for a corrupt artifact,
    RuntimeError when the runtime cannot run here."""
    artifact = load_artifact("etr", version)
    engine = load_runtime(artifact, runtime)  # type: ignore[arg-type]
    sample = np.load(artifact.path / "sample_features.npy", allow_pickle=False)[:16]
    reference = engine.to_numpy(
        engine.predict(sample)
    )  # the first call allocates: not on a request
    return LoadedModel(
        artifact.version, engine, sample, reference, ModelMetrics(f"etr-v{artifact.version}")
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
    model: LoadedModel | None = None  # the version serving when the request arrived
    queue_ns: int = 0  # arrival to its first call
    compute_ns: int = 0  # its calls' time


class EtrBatcher:
    """The ETR model versions of one process behind the classed, adaptive batcher (module doc),
    used by the Etr deployment (``actors.etr_model``) and by an ingress that computes the model
    itself (``serve_app.local_etr``).

    runtime : see etr.select; guard : the process's ``actors.device.GuardSettings`` as a dict;
    speed : its throughput relative to the reference device (the router's weight);
    inline_calls : call the model on the event loop instead of in a worker thread (a CPU model
    of microseconds in a process that is not a replica: the ingress; the thread hand-off costs
    more than such a call).

    The model loads in ``reconfigure`` (its version is ``EtrUserConfig.model_version``), which
    Serve calls after ``__init__``; call it yourself when using the class without Serve."""

    def __init__(
        self,
        runtime: str = "auto",
        guard: dict[str, Any] | None = None,
        speed: float = 1.0,
        inline_calls: bool = False,
    ) -> None:
        self.settings = GuardSettings(**(guard or {}))
        self.runtime_name = runtime
        self.inline_calls = inline_calls
        self.config = EtrUserConfig()
        self.models: dict[str, LoadedModel] = {}  # every version loaded here
        self.serving: LoadedModel | None = None  # the one new requests go to
        self.guard: Any = None  # actors.device.DeviceGuard, armed with the first model
        self._loading = asyncio.Lock()  # one reconfigure at a time
        self.load = ReplicaLoad(
            speed=speed,
            window_s=self.settings.busy_window_s,
            stuck_after_s=self.settings.stuck_after_s,
        )
        self._queue = BatchQueue(self.config.offline_aging_s)
        self._pacing = OfflinePacing(self.config.offline_rows_while_online)
        self._offline_call_s = math.inf  # an offline-only call's time by the profile
        self._pending: dict[int, _Pending] = {}
        self._has_work: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._device: asyncio.Lock | None = None  # one model call at a time (created on the loop)
        # (model, rows, class, arrival ns, its caller's future) of the requests of this turn
        self._turn: list[
            tuple[LoadedModel, np.ndarray, TrafficClass, int, asyncio.Future[Any]]
        ] = []

    async def reconfigure(self, user_config: dict[str, Any]) -> None:
        """Apply ``user_config``: load the versions it names that are not loaded yet (in a
        worker thread, while the loaded ones keep answering), then swap at once. Nothing
        changes when it raises: pydantic.ValidationError naming a bad field, FileNotFoundError
        for a version not in the repository, ValueError for a batch over the memory budget."""
        config = EtrUserConfig(**user_config)
        async with self._loading:
            serve_version = config.model_version or versions("etr")[-1]
            wanted = [serve_version, *(v for v in config.warm_versions if v != serve_version)]
            models = {}
            for version in wanted:
                models[version] = self.models.get(version) or await asyncio.to_thread(
                    load_model, version, self.runtime_name
                )
            serving = models[serve_version]
            if config.memory_budget_mb is not None:
                enforce_memory_budget(
                    serving.runtime.device, config.max_batch_size, config.memory_budget_mb
                )
            if self.serving is not None and serving is not self.serving:
                log.info("ETR model v%s -> v%s", self.serving.version, serving.version)
            # The swap: plain assignments on the event loop, so a request sees the old set or
            # the new one. Requests already queued keep the model they arrived under.
            self.models, self.serving, self.config = models, serving, config
            self._queue.offline_aging_s = config.offline_aging_s
            self._pacing.rows_while_online = config.offline_rows_while_online
            self._pacing.short_call_s = config.offline_short_call_ms / 1e3
            self._offline_call_s = (
                profiled_call_s(
                    serving.runtime.device,
                    min(config.offline_rows_while_online, config.max_batch_size),
                )
                if config.offline_short_call_ms
                else math.inf
            )
            if self.guard is None:  # armed once, with the first model (it probes at once)
                self.guard = replica_guard(serving.runtime.device, self._probe, self.settings)

    def _probe(self) -> np.ndarray:
        """The serving model's drift from its own answer at load, float32[16] (zeros while the
        device computes right). The guard compares probes with the first one, so the probe
        must not change when a roll swaps models: a drift does not, the minutes would."""
        model = self.serving
        assert model is not None
        return model.runtime.to_numpy(model.runtime.predict(model.sample)) - model.reference

    @property
    def runtime(self) -> EtrRuntime:
        """The serving version's runtime."""
        if self.serving is None:
            raise RuntimeError("no ETR model loaded: reconfigure has not run")
        return self.serving.runtime

    def ready(self) -> dict[str, Any]:
        return {
            **self.config.model_dump(),
            "model_version": self.serving.version if self.serving else None,
            "loaded_versions": sorted(self.models),
            "stats": {v: m.stats.as_dict() for v, m in self.models.items()},
            "runtime": self.runtime.name,
            "replica": replica_id(),
            "healthy": self.guard.healthy,
            "reason": self.guard.reason,
        }

    async def predict(
        self,
        features: np.ndarray,
        traffic_class: str = TrafficClass.ONLINE,
        timeout_s: float = math.inf,
        version: str | None = None,
    ) -> Prediction:
        """Minutes float32[k] for features float32[k, 39], and the version that computed them.

        traffic_class : "online" rows go first; timeout_s : how long the caller still waits;
        version : a loaded version to answer with (None: the serving one). Raises ValueError
        on bad rows, VersionNotLoaded for a version not loaded here, DeviceUnhealthy after a
        device fault, DeadlinePassed if the request expired before any of it ran.
        """
        self.guard.ensure()
        model = self.serving if version is None else self.models.get(version)
        if model is None:
            raise VersionNotLoaded(str(version), sorted(self.models))
        # Checked here, per request, so one caller's bad rows never fail a whole batch.
        features = check_features(np.asarray(features, np.float32), model.runtime.n_features)
        start = time.perf_counter_ns()
        try:
            minutes, queue_ns, compute_ns = await self._minutes(
                features, TrafficClass(traffic_class), timeout_s, model
            )
        except Exception:
            model.stats.failed(time.perf_counter_ns() - start)
            raise
        model.stats.answered(queue_ns, compute_ns, time.perf_counter_ns() - start)
        return Prediction(minutes, model.version)

    async def _minutes(
        self, features: np.ndarray, cls: TrafficClass, timeout_s: float, model: LoadedModel
    ) -> tuple[np.ndarray, int, int]:
        """(minutes float32[k], ns queued before the first call, ns of the calls)."""
        if cls is TrafficClass.ONLINE:
            self._pacing.saw_online(time.monotonic())
        if not self.config.batching:
            return await self._run_alone(features, cls, model)
        if self.inline_calls:
            return await self._in_this_turn(features, cls, model)
        if self._device is None:
            self._device = asyncio.Lock()
        if (
            not self._device.locked()
            and not len(self._queue)
            # Offline rows run alone only as many as one call may carry now (a short
            # offline-only call beside online traffic is capped at offline_rows_while_online).
            and len(features)
            <= (self.config.max_batch_size if cls is TrafficClass.ONLINE else self._offline_cap())
            and (cls is TrafficClass.ONLINE or self._offline_hold_s() == 0)
            and self.config.batch_wait_timeout_s == 0
        ):
            # An idle device and nothing waiting: run now, no hand-off to the batch loop.
            # Requests arriving meanwhile queue and go together as the next batch.
            async with self._device:
                out = await self._run_alone(features, cls, model)
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
            model=model,
        )
        self._pending[key] = pending
        self._wake()
        try:
            return await pending.future, pending.queue_ns, pending.compute_ns
        except asyncio.CancelledError:  # the caller went away: its rows need not run
            self._queue.remove(key)
            self._pending.pop(key, None)
            raise

    async def _in_this_turn(
        self, features: np.ndarray, cls: TrafficClass, model: LoadedModel
    ) -> tuple[np.ndarray, int, int]:
        """Inline calls batch what arrives in one turn of the event loop: the first request
        of a turn schedules the call for the end of it (``call_soon``), and the requests the
        loop runs before that join it. No wait, no thread: a call runs as soon as the loop
        has nothing else ready."""
        future: asyncio.Future[tuple[np.ndarray, int, int]] = (
            asyncio.get_running_loop().create_future()
        )
        self._turn.append((model, features, cls, time.perf_counter_ns(), future))
        if len(self._turn) == 1:
            asyncio.get_running_loop().call_soon(self._run_turn)
        return await future

    def _run_turn(self) -> None:
        turn, self._turn = self._turn, []
        turn = [t for t in turn if not t[4].done()]  # cancelled callers need nothing run
        turn.sort(key=lambda t: t[2].rank)  # online rows first
        limit = self.config.max_batch_size
        while turn:
            batch, rows = [], 0
            while turn and (not batch or rows + len(turn[0][1]) <= limit):
                batch.append(turn.pop(0))
                rows += len(batch[-1][1])
            groups: dict[LoadedModel, list[int]] = {}
            for k, (model, *_) in enumerate(batch):
                groups.setdefault(model, []).append(k)
            calls = [(m, np.concatenate([batch[k][1] for k in ks])) for m, ks in groups.items()]
            online = any(t[2] is TrafficClass.ONLINE for t in batch)
            t0 = time.perf_counter_ns()
            try:
                outs = self._run_model(
                    calls, TrafficClass.ONLINE if online else TrafficClass.OFFLINE
                )
            except Exception as exc:
                for *_, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            compute_ns = time.perf_counter_ns() - t0
            for (model, rows_in), out, ks in zip(calls, outs, groups.values(), strict=True):
                model.metrics.observe(0.0, compute_ns / 1e6, len(rows_in))
                model.stats.executed(len(rows_in), compute_ns)
                offset = 0
                for k in ks:
                    _, rows_k, _, arrived, future = batch[k]
                    if not future.done():
                        future.set_result(
                            (out[offset : offset + len(rows_k)], t0 - arrived, compute_ns)
                        )
                    offset += len(rows_k)

    def _offline_cap(self) -> int:
        return self._pacing.offline_cap(time.monotonic(), self.config.max_batch_size)

    def _offline_hold_s(self) -> float:
        return self._pacing.hold_s(self._queue, time.monotonic(), self._offline_call_s)

    async def _run_alone(
        self, features: np.ndarray, cls: TrafficClass, model: LoadedModel
    ) -> tuple[np.ndarray, int, int]:
        t0 = time.perf_counter_ns()
        out = await self._call_model([(model, features)], cls)
        compute_ns = time.perf_counter_ns() - t0
        model.metrics.observe(0.0, compute_ns / 1e6, len(features))
        model.stats.executed(len(features), compute_ns)
        return out[0], 0, compute_ns

    async def _call_model(
        self, calls: list[tuple[LoadedModel, np.ndarray]], cls: TrafficClass
    ) -> list[np.ndarray]:
        """``_run_model``: in a worker thread (the event loop keeps queueing the next batch,
        and a wedged device blocks that thread, not the health check), or inline."""
        if self.inline_calls:
            return self._run_model(calls, cls)
        return await asyncio.to_thread(self._run_model, calls, cls)

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
        # Grouped by the version each request arrived under: during a roll one batch may hold
        # rows for two versions, each group runs on its own model.
        groups: dict[LoadedModel, list[np.ndarray]] = {}
        models = []  # per slice
        for s in batch.slices:
            pending = self._pending[s.key]
            assert pending.model is not None
            models.append(pending.model)
            groups.setdefault(pending.model, []).append(pending.features[s.start : s.stop])
        calls = [(m, p[0] if len(p) == 1 else np.concatenate(p)) for m, p in groups.items()]
        start, started_at = time.perf_counter_ns(), time.monotonic()
        try:
            online = any(
                self._pending[s.key].traffic_class is TrafficClass.ONLINE for s in batch.slices
            )
            cls = TrafficClass.ONLINE if online else TrafficClass.OFFLINE
            outs = await self._call_model(calls, cls)
        except Exception as exc:
            for s in batch.slices:
                self._queue.remove(s.key)
                pending = self._pending.pop(s.key, None)
                if pending is not None and not pending.future.done():
                    pending.future.set_exception(exc)
            return
        compute_ns = time.perf_counter_ns() - start
        answers: dict[LoadedModel, tuple[np.ndarray, int]] = {}
        for (model, rows), out in zip(calls, outs, strict=True):
            model.metrics.observe(None, compute_ns / 1e6, len(rows))
            model.stats.executed(len(rows), compute_ns)
            answers[model] = (out, 0)
        for s, model in zip(batch.slices, models, strict=True):
            out, offset = answers[model]
            part = out[offset : offset + s.rows]
            answers[model] = (out, offset + s.rows)
            pending = self._pending.get(s.key)
            if pending is None:  # cancelled meanwhile
                continue
            if not pending.started:
                pending.started = True
                pending.queue_ns = int((started_at - pending.enqueued) * 1e9)
                model.metrics.observe(pending.queue_ns / 1e6, None, None)
            pending.compute_ns += compute_ns
            pending.out[s.start : s.stop] = part
            pending.done_rows += s.rows
            if pending.done_rows == len(pending.out):
                del self._pending[s.key]
                if not pending.future.done():
                    pending.future.set_result(pending.out)

    def _run_model(
        self, calls: list[tuple[LoadedModel, np.ndarray]], cls: TrafficClass = TrafficClass.ONLINE
    ) -> list[np.ndarray]:
        """One device call per (model, rows float32[n, 39]); minutes float32[n] each."""
        with self.load.working(cls), self.guard.watch(self.settings.watchdog_s):
            return [m.runtime.to_numpy(m.runtime.predict(rows)) for m, rows in calls]
