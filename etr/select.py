"""Choosing an ETR runtime: TensorRT > CuPy > ONNX Runtime, unless configured otherwise."""

from __future__ import annotations

from typing import Literal

import numpy as np

from etr.repository import ModelArtifact
from etr.runtime import EtrRuntime

RuntimeName = Literal["auto", "tensorrt", "cupy", "onnxruntime", "numpy"] | str
#: The runtimes whose model runs on the CPU (the others own a GPU).
CPU_RUNTIMES = frozenset({"onnxruntime", "numpy"})


def load_runtime(
    artifact: ModelArtifact, runtime: RuntimeName = "auto", *, max_batch: int | None = None
) -> EtrRuntime:
    """The best runtime available (``auto``) or the one named; ``emulated:<profile>`` is ONNX
    Runtime's answers at the times of a GPU type's profile (``etr.runtime_emulated``).

    Raises ValueError for an unknown name, RuntimeError when the named runtime cannot run here.
    """
    from etr.runtime_tensorrt import tensorrt_available
    from kernels.backend import cupy_available

    if runtime == "auto":
        if tensorrt_available():
            runtime = "tensorrt"
        elif cupy_available():
            runtime = "cupy"
        else:
            runtime = "onnxruntime"
    if runtime == "tensorrt":
        if not tensorrt_available():
            raise RuntimeError("runtime 'tensorrt' requested but TensorRT or a GPU is missing")
        from etr.runtime_tensorrt import TensorRTEtr

        return TensorRTEtr(artifact, max_batch=max_batch or 4096)
    if runtime == "cupy":
        if not cupy_available():
            raise RuntimeError("runtime 'cupy' requested but no working CUDA device is found")
        import cupy

        from etr.runtime_array import ArrayEtr

        return ArrayEtr(artifact, xp=cupy, max_batch=max_batch)
    if runtime == "numpy":
        from etr.runtime_array import ArrayEtr

        return ArrayEtr(artifact, xp=np, max_batch=max_batch)
    if runtime == "onnxruntime":
        from etr.runtime_onnx import OnnxRuntimeEtr

        return OnnxRuntimeEtr(artifact, max_batch=max_batch)
    if runtime.startswith("emulated:"):
        from etr.runtime_emulated import load_emulated
        from etr.runtime_onnx import OnnxRuntimeEtr

        return load_emulated(OnnxRuntimeEtr(artifact, max_batch=max_batch), runtime[9:])
    raise ValueError(
        f"unknown ETR runtime {runtime!r}: expected auto, tensorrt, cupy, onnxruntime, numpy "
        "or emulated:<profile>"
    )
