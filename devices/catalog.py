"""The GPU types the system knows (``devices/gpu_types.yaml``) and which one this machine has.

Device knowledge on a floor of its own: the ETR deployment sizes its batches from it, the
emulated devices take their call times from it, and ``placement`` plans with it. Files that do
not validate raise ``DeviceInputError`` naming the file and the field.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

CATALOG_PATH = Path(__file__).with_name("gpu_types.yaml")


class DeviceInputError(ValueError):
    """A catalogue, inventory, demand or profile file that does not validate (file and field
    named)."""


class GpuType(BaseModel):
    """One GPU model's datasheet figures (memory in MiB, price in USD per card-hour)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    ray_accelerator: str | None = Field(description="Ray's accelerator_type for this card.")
    gpu_product: str | None = Field(
        None, description="Kubernetes node label nvidia.com/gpu.product for this card."
    )
    memory_mb: int = Field(gt=0)
    sm_count: int = Field(gt=0)
    compute_capability: str
    fp16_tflops: float = Field(gt=0)
    mem_bw_gbs: float = Field(gt=0)
    price_per_hour: float = Field(ge=0)
    context_mb: int = Field(ge=0, description="One process's CUDA context, MiB.")

    @property
    def speed(self) -> float:
        """Relative throughput: geometric mean of FP16 TFLOPS and bandwidth (GB/s)."""
        return (self.fp16_tflops * self.mem_bw_gbs) ** 0.5


class _Catalog(BaseModel):
    model_config = ConfigDict(extra="forbid")
    types: list[GpuType]


@lru_cache(maxsize=1)
def gpu_types() -> dict[str, GpuType]:
    """The catalogue in ``devices/gpu_types.yaml`` by name."""
    catalog = parse_model(_Catalog, yaml.safe_load(CATALOG_PATH.read_text()), CATALOG_PATH)
    return {t.name: t for t in catalog.types}


def local_gpu_type(index: int = 0) -> str:
    """The catalogue type of this machine's GPU ``index`` (read with pynvml)."""
    import pynvml

    pynvml.nvmlInit()
    try:
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(index))
    finally:
        pynvml.nvmlShutdown()
    return catalog_name(name.decode() if isinstance(name, bytes) else name)


def catalog_name(nvml_name: str) -> str:
    """Map an NVML device name ("NVIDIA H100 80GB HBM3") to a catalogue type ("H100")."""
    upper = nvml_name.upper()
    if "A100" in upper:
        return "A100-80GB"
    for name in sorted(gpu_types(), key=len, reverse=True):
        if name.upper() in upper:
            return name
    raise DeviceInputError(f"GPU {nvml_name!r} is not in {CATALOG_PATH.name}")


def read_yaml(path: Path) -> Any:
    """A YAML file's content; DeviceInputError naming the file when unreadable or not YAML."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise DeviceInputError(f"{path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise DeviceInputError(f"{path}: not valid YAML ({exc})") from exc


T = TypeVar("T", bound=BaseModel)


def parse_model(cls: type[T], raw: Any, path: Path) -> T:
    """``cls`` validated from ``raw``; DeviceInputError naming ``path`` and the first bad field."""
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        raise DeviceInputError(f"{path}: {loc.lstrip('.') or '(top)'}: {err['msg']}") from exc
