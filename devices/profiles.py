"""Model profiles: device memory split and latency versus batch size, per model and device type.

A profile is a JSON file ``profiles/<model>/<device>.json``. Measured ones come from
``placement.profiler`` (or, for the ETR runtimes, ``bench/etr.py --profiles``, whose format is
read here too). A type nobody measured gets an estimate by the scaling rule below, flagged
``estimate: true`` with its basis, and never silently mixed with measurements.

Scaling rule (docs/placement.md): from the fastest measured device of the same kind (CPU
nodes from CPU nodes, cards from cards), latency(b) on type T = max(floor,
latency_ref(b) x speed_ref / speed_T), where speed is the geometric mean of FP16 TFLOPS and
memory bandwidth (``GpuType.speed``) and floor is a kernel-launch floor of 0.02 ms; a round's
cost by size scales by the same ratio (pessimistic for a slower card: part of a round is host
work that does not slow with the card); memory keeps the reference's weights, workspace and
per-row activations and takes T's CUDA context size.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from devices.catalog import DeviceInputError, GpuType, gpu_types

LAUNCH_FLOOR_MS = 0.02


class ProfilePoint(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    batch: int = Field(ge=1, description="Rows per model call.")
    p50_ms: float = Field(gt=0)
    p99_ms: float = Field(gt=0)


class RoundPoint(BaseModel):
    """The OR solver's cost of one round of a size (riders x orders): it is not batched, so
    its latency grows with the round, not with rows per call."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    round: str = Field(pattern=r"^\d+x\d+$", description="RIDERSxORDERS")
    p50_ms: float = Field(gt=0)
    p99_ms: float | None = Field(None, gt=0, description="None where the run kept medians only.")

    @property
    def pairs(self) -> int:
        """Rider x order pairs: the size the round's cost grows with."""
        riders, orders = self.round.split("x")
        return int(riders) * int(orders)


class ModelProfile(BaseModel):
    """One model on one device type. Memory in MiB; ``per_row_kb`` grows with the batch."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: str
    device_type: str = Field(description="A name from devices/gpu_types.yaml.")
    runtime: str = ""
    measured: str | None = Field(None, description="Date measured; None for an estimate.")
    estimate: bool = False
    basis: str = Field("", description="How an estimate was derived.")
    context_mb: float = Field(ge=0, description="CUDA context (CPU: the runtime's process).")
    weights_mb: float = Field(ge=0)
    workspace_mb: float = Field(ge=0, description="Fixed scratch (TensorRT workspace, pools).")
    per_row_kb: float = Field(ge=0, description="Activations per batch row, KiB.")
    points: list[ProfilePoint] = Field(min_length=1)
    round_sizes: list[RoundPoint] = Field(
        default_factory=list, description="The OR solver's round by size (placement.profiler)."
    )
    host: str = Field("", description="The machine's processor, as measured.")
    command: str = Field("", description="The command that measured it.")

    def batches(self) -> list[int]:
        return sorted(p.batch for p in self.points)

    def latency_ms(self, batch: int, quantile: str = "p99") -> float:
        """Latency of one call of ``batch`` rows, interpolated log-log between points (ms)."""
        pts = sorted(self.points, key=lambda p: p.batch)
        value = [getattr(p, f"{quantile}_ms") for p in pts]
        if batch <= pts[0].batch:
            return value[0]
        for lo, hi, vlo, vhi in zip(pts, pts[1:], value, value[1:], strict=False):
            if batch <= hi.batch:
                t = math.log(batch / lo.batch) / math.log(hi.batch / lo.batch)
                return math.exp(math.log(vlo) + t * (math.log(vhi) - math.log(vlo)))
        # Past the last point: linear in rows (a full device scales no better).
        return value[-1] * batch / pts[-1].batch

    def round_ms(self, pairs: float) -> float:
        """Median ms of one round of ``pairs`` rider x order pairs, interpolated log-log between
        the measured ``round_sizes``; below the smallest its cost (a round's fixed part), past
        the largest linear in pairs. Raises DeviceInputError when the profile has no sizes."""
        sizes = sorted(self.round_sizes, key=lambda r: r.pairs)
        if not sizes:
            raise DeviceInputError(f"{self.model} on {self.device_type}: no round_sizes")
        if pairs <= sizes[0].pairs:
            return sizes[0].p50_ms
        for lo, hi in itertools.pairwise(sizes):
            if pairs <= hi.pairs:
                t = math.log(pairs / lo.pairs) / math.log(hi.pairs / lo.pairs)
                return math.exp(math.log(lo.p50_ms) + t * math.log(hi.p50_ms / lo.p50_ms))
        return sizes[-1].p50_ms * pairs / sizes[-1].pairs

    def memory_mb(self, batch: int) -> float:
        """Device memory of one replica running batches of ``batch`` rows (MiB)."""
        return (
            self.context_mb + self.weights_mb + self.workspace_mb + batch * self.per_row_kb / 1024
        )

    def scaled_to(self, target: GpuType) -> ModelProfile:
        """This profile carried to another type by the module's scaling rule (an estimate)."""
        ref = gpu_types()[self.device_type]
        ratio = ref.speed / target.speed
        points = [
            ProfilePoint(
                batch=p.batch,
                p50_ms=max(LAUNCH_FLOOR_MS, p.p50_ms * ratio),
                p99_ms=max(LAUNCH_FLOOR_MS, p.p99_ms * ratio),
            )
            for p in self.points
        ]
        return self.model_copy(
            update={
                "device_type": target.name,
                "measured": None,
                "estimate": True,
                "basis": f"scaled from {self.device_type} ({self.runtime or 'default'}) by "
                f"speed ratio {ratio:.4g}; context {target.context_mb} MiB",
                "context_mb": float(target.context_mb),
                "points": points,
                "round_sizes": [
                    r.model_copy(
                        update={
                            "p50_ms": r.p50_ms * ratio,
                            "p99_ms": None if r.p99_ms is None else r.p99_ms * ratio,
                        }
                    )
                    for r in self.round_sizes
                ],
                "host": "",
                "command": "",
            }
        )


class ProfileSet:
    """The profiles under a directory; ``get`` returns measured, else an estimate."""

    def __init__(self, profiles: list[ModelProfile]) -> None:
        self._measured: dict[tuple[str, str], ModelProfile] = {}
        for p in profiles:
            key = (p.model, p.device_type)
            # Prefer measured over estimated, then the faster runtime at batch 1.
            old = self._measured.get(key)
            if old is None or (old.estimate, old.latency_ms(1)) > (p.estimate, p.latency_ms(1)):
                self._measured[key] = p

    @classmethod
    def load(cls, root: Path) -> ProfileSet:
        return cls([load_profile(path) for path in sorted(Path(root).glob("*/*.json"))])

    def models(self) -> set[str]:
        return {m for m, _ in self._measured}

    def get(self, model: str, device_type: str) -> ModelProfile:
        """Raises DeviceInputError when no profile of ``model`` exists at all."""
        if (model, device_type) in self._measured:
            return self._measured[(model, device_type)]
        refs = [p for (m, _), p in self._measured.items() if m == model and not p.estimate]
        refs = refs or [p for (m, _), p in self._measured.items() if m == model]
        if not refs:
            raise DeviceInputError(f"no profile for model {model!r} (profiles/{model}/)")
        # Scale from a device of the same kind (a CPU from a CPU, a card from a card: a GPU's
        # launch and copy costs say nothing of a CPU's), the fastest measured: the smallest
        # extrapolation.
        target = gpu_types()[device_type]
        same_kind = [p for p in refs if _is_cpu(gpu_types()[p.device_type]) == _is_cpu(target)]
        ref = max(same_kind or refs, key=lambda p: gpu_types()[p.device_type].speed)
        return ref.scaled_to(target)


def _is_cpu(device: GpuType) -> bool:
    return device.ray_accelerator is None


def load_profile(path: Path) -> ModelProfile:
    """Read one profile (this module's format or bench/etr.py's); errors name the file."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise DeviceInputError(f"{path}: {exc}") from exc
    if "device_type" not in raw and "process_rss_before_load_bytes" in raw:
        raw = _from_bench_etr(raw)
    try:
        profile = ModelProfile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise DeviceInputError(f"{path}: {where}: {err['msg']}") from exc
    if profile.device_type not in gpu_types():
        raise DeviceInputError(f"{path}: device_type: unknown type {profile.device_type!r}")
    return profile


def _from_bench_etr(raw: dict[str, Any]) -> dict[str, Any]:
    """bench/etr.py's CPU profile: process RSS before load is the "context", the growth of
    RSS with the batch gives the per-row activations."""
    mib = 2**20
    pts = sorted(raw["points"], key=lambda p: p["batch"])
    first, last = pts[0], pts[-1]
    per_row = max(
        0.0, (last["memory_bytes"] - first["memory_bytes"]) / max(1, last["batch"] - first["batch"])
    )
    base = raw["process_rss_before_load_bytes"]
    return {
        "model": raw["model"],
        "device_type": "CPU-2core" if raw["device"] == "cpu" else raw["device"],
        "runtime": raw.get("runtime", ""),
        "measured": raw.get("measured"),
        "context_mb": base / mib,
        "weights_mb": raw["weights_bytes"] / mib,
        "workspace_mb": max(0.0, first["memory_bytes"] - base - raw["weights_bytes"]) / mib,
        "per_row_kb": per_row / 1024,
        "points": [
            {"batch": p["batch"], "p50_ms": p["p50_ms"], "p99_ms": p["p99_ms"]} for p in pts
        ],
    }
