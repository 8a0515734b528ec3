"""The ETR runtime interface: ``predict(features float32[B, F]) -> float32[B]`` minutes.

Every runtime checks its input the same way before it runs (``check_features``), so bad input
is a ``ValueError`` naming the problem, never a crash inside ONNX Runtime, CuPy or TensorRT.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.backend import array_module


def check_features(features: Any, n_features: int, max_batch: int | None = None) -> Any:
    """Validate a batch; returns it as a C-contiguous float32 array on its own device.

    Raises ValueError for: not 2-D, a wrong feature count, an empty batch, a batch over
    ``max_batch``, or NaN / infinite values (naming the first bad row).
    """
    xp = array_module(features)
    a = xp.asarray(features)
    if a.ndim != 2:
        raise ValueError(f"features must be 2-D [batch, {n_features}], got shape {tuple(a.shape)}")
    if a.shape[1] != n_features:
        raise ValueError(f"expected {n_features} features per row, got {a.shape[1]}")
    if a.shape[0] == 0:
        raise ValueError("empty batch: features has 0 rows")
    if max_batch is not None and a.shape[0] > max_batch:
        raise ValueError(f"batch of {a.shape[0]} rows exceeds max_batch {max_batch}")
    a = xp.ascontiguousarray(a, dtype=xp.float32)
    finite = xp.isfinite(a).all(axis=1)
    if not bool(finite.all()):
        bad = int(xp.nonzero(~finite)[0][0])
        raise ValueError(f"features contain NaN or infinite values (first in row {bad})")
    return a


@dataclass(frozen=True)
class Prediction:
    """A served answer: minutes float32[k] and the model version that computed all of them."""

    minutes: np.ndarray
    model_version: str


class EtrRuntime(ABC):
    """A loaded ETR model on one device."""

    name: str = "abstract"
    device: str = "cpu"

    def __init__(self, n_features: int, max_batch: int | None = None) -> None:
        self.n_features = n_features
        self.max_batch = max_batch

    def predict(self, features: Any) -> Any:
        """Minutes float32[B] for features float32[B, F]; on the runtime's device.

        Raises ValueError on bad input (``check_features``).
        """
        return self._run(check_features(features, self.n_features, self.max_batch))

    @abstractmethod
    def _run(self, features: Any) -> Any:
        """Predict on checked input."""

    def to_numpy(self, minutes: Any) -> np.ndarray:
        get = getattr(minutes, "get", None)
        return get() if callable(get) else np.asarray(minutes)
