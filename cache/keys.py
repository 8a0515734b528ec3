"""Cache keys: ``orml:{namespace}:{model_version}:{hash}``.

The hash is BLAKE2b-128 over a canonical form of the inputs: mapping keys sorted, sequences kept
in order, floats quantised so that requests that differ by less than a step hit the same entry.
Steps (``Quantisation``) are chosen by field name: coordinates (``lat``, ``lng``), times (names
ending ``_at`` or ``_s``, and ``now``), everything else ``default``. Arrays are quantised with
``default``. The model version is part of the key, so a new version never reads an old entry.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np


@dataclass(frozen=True)
class Quantisation:
    """Steps: coordinates in degrees (1e-5 deg ~ 1.1 m), times in seconds, other floats."""

    coord_deg: float = 1e-5
    time_s: float = 1.0
    default: float = 1e-6

    def step_for(self, name: str | None) -> float:
        if name in ("lat", "lng"):
            return self.coord_deg
        if name is not None and (name.endswith(("_at", "_s")) or name == "now"):
            return self.time_s
        return self.default


def _q(x: float, step: float) -> int | str:
    if not math.isfinite(x):
        return repr(x)
    return round(x / step)


def canonical(obj: Any, quant: Quantisation = Quantisation(), _name: str | None = None) -> Any:
    """A msgpack-able structure equal for inputs equal up to quantisation.

    Raises TypeError for values it cannot canonicalise.
    """
    if isinstance(obj, dict):
        return [["m"], *([str(k), canonical(v, quant, str(k))] for k, v in sorted(obj.items()))]
    if isinstance(obj, list | tuple):
        return [["l"], *(canonical(v, quant, _name) for v in obj)]
    if isinstance(obj, bool) or obj is None or isinstance(obj, int | str | bytes):
        return obj
    if isinstance(obj, float | np.floating):
        return ["f", _q(float(obj), quant.step_for(_name))]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f":
            step = quant.step_for(_name)
            data = np.round(obj.astype(np.float64) / step).astype(np.int64)
            return ["a", obj.shape, data.tobytes()]
        return ["a", obj.shape, obj.dtype.str, np.ascontiguousarray(obj).tobytes()]
    if hasattr(obj, "model_dump"):  # pydantic models
        return canonical(obj.model_dump(), quant, _name)
    raise TypeError(f"cannot build a cache key from {type(obj).__name__}")


def cache_key(
    namespace: str, model_version: str, payload: Any, quant: Quantisation = Quantisation()
) -> str:
    """``orml:{namespace}:{model_version}:{32 hex chars}``; ValueError on ':' in a name."""
    for label, part in (("namespace", namespace), ("model_version", model_version)):
        if not part or ":" in part:
            raise ValueError(f"{label} must be non-empty without ':', got {part!r}")
    blob = msgpack.packb(canonical(payload, quant), use_bin_type=True)
    return f"orml:{namespace}:{model_version}:{hashlib.blake2b(blob, digest_size=16).hexdigest()}"
