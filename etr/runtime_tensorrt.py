"""TensorRT on an NVIDIA GPU (written against the TensorRT 10 Python API).

Builds an engine from the same ONNX artifact with one optimisation profile for batch
1..max_batch, in FP16 when FP16 keeps the predictions within ``fp16_tolerance_min`` of ONNX
Runtime on the artifact's sample rows (else FP32), and caches the serialized engine on disk keyed
by (ONNX sha256, GPU name, TensorRT version, precision, max batch): a restart loads the plan
instead of rebuilding it. Inputs and outputs are CuPy arrays: they stay on the device.

TensorRT's libraries are not installable from the package registries this project's CI reaches;
the tests of this runtime skip where ``import tensorrt`` fails.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from etr.repository import ModelArtifact
from etr.runtime import EtrRuntime

DEFAULT_CACHE = Path.home() / ".cache" / "orml" / "trt"


def tensorrt_available() -> bool:
    try:
        import tensorrt  # noqa: F401

        from kernels.backend import cupy_available

        return cupy_available()
    except Exception:
        return False


def engine_key(sha256: str, gpu_name: str, trt_version: str, precision: str, max_batch: int) -> str:
    raw = f"{sha256}|{gpu_name}|{trt_version}|{precision}|{max_batch}"
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


class TensorRTEtr(EtrRuntime):
    """A TensorRT engine for the ETR artifact.

    max_batch : the profile's largest batch (and the input limit).
    workspace_bytes : TensorRT builder workspace limit (the replica's memory budget share).
    Raises RuntimeError when the ONNX parse or the engine build fails.
    """

    name = "tensorrt"
    device = "cuda"

    def __init__(
        self,
        artifact: ModelArtifact,
        *,
        max_batch: int = 4096,
        workspace_bytes: int = 256 << 20,
        cache_dir: Path = DEFAULT_CACHE,
        fp16: bool = True,
        fp16_tolerance_min: float = 0.05,
    ) -> None:
        import cupy
        import tensorrt as trt

        super().__init__(artifact.n_features, max_batch)
        self._trt, self._cupy = trt, cupy
        self._logger = trt.Logger(trt.Logger.WARNING)
        gpu = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
        gpu = gpu.decode() if isinstance(gpu, bytes) else str(gpu)
        self.gpu_name = gpu
        cache_dir.mkdir(parents=True, exist_ok=True)
        sample = _sample_rows(artifact)
        if sample is not None:
            sample = sample[:max_batch]
        precisions = ["fp16", "fp32"] if fp16 else ["fp32"]
        for precision in precisions:
            key = engine_key(artifact.sha256, gpu, trt.__version__, precision, max_batch)
            plan_path = cache_dir / f"etr-{key}.plan"
            if plan_path.is_file():
                plan = plan_path.read_bytes()
            else:
                plan = self._build(artifact.onnx_bytes, precision, max_batch, workspace_bytes)
                plan_path.write_bytes(plan)
            self._load(plan)
            self.precision = precision
            if precision == "fp32" or sample is None:
                break
            error = np.abs(self.to_numpy(self._run(sample)) - _reference(artifact, sample))
            if float(error.max()) <= fp16_tolerance_min:
                break
        self.engine_path = plan_path

    def _build(self, onnx_bytes: bytes, precision: str, max_batch: int, workspace: int) -> bytes:
        trt = self._trt
        builder = trt.Builder(self._logger)
        network = builder.create_network(0)
        parser = trt.OnnxParser(network, self._logger)
        if not parser.parse(onnx_bytes):
            errors = "; ".join(str(parser.get_error(k)) for k in range(parser.num_errors))
            raise RuntimeError(f"TensorRT could not parse the ETR ONNX model: {errors}")
        config = builder.create_builder_config()
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace)
        if precision == "fp16":
            config.set_flag(trt.BuilderFlag.FP16)
        profile = builder.create_optimization_profile()
        name = network.get_input(0).name
        f = self.n_features
        profile.set_shape(name, (1, f), (max(1, max_batch // 8), f), (max_batch, f))
        config.add_optimization_profile(profile)
        plan = builder.build_serialized_network(network, config)
        if plan is None:
            raise RuntimeError("TensorRT engine build failed (see the TensorRT log)")
        return bytes(plan)

    def _load(self, plan: bytes) -> None:
        trt = self._trt
        self._runtime = trt.Runtime(self._logger)
        self._engine = self._runtime.deserialize_cuda_engine(plan)
        if self._engine is None:
            raise RuntimeError("TensorRT could not deserialize the cached ETR engine")
        self._context = self._engine.create_execution_context()
        names = [self._engine.get_tensor_name(k) for k in range(self._engine.num_io_tensors)]
        inputs = [n for n in names if self._engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self._input = inputs[0]
        self._output = next(n for n in names if n not in inputs)
        self.engine_bytes = int(self._engine.device_memory_size)
        self._stream = self._cupy.cuda.Stream(non_blocking=True)

    def _run(self, features: Any) -> Any:
        cupy = self._cupy
        x = cupy.ascontiguousarray(cupy.asarray(features, dtype=cupy.float32))
        out = cupy.empty(x.shape[0], cupy.float32)
        self._context.set_input_shape(self._input, tuple(x.shape))
        self._context.set_tensor_address(self._input, x.data.ptr)
        self._context.set_tensor_address(self._output, out.data.ptr)
        if not self._context.execute_async_v3(self._stream.ptr):
            raise RuntimeError("TensorRT execution failed")
        self._stream.synchronize()
        return out


def _sample_rows(artifact: ModelArtifact) -> np.ndarray | None:
    path = artifact.path / "sample_features.npy"
    return np.load(path, allow_pickle=False) if path.is_file() else None


def _reference(artifact: ModelArtifact, sample: np.ndarray) -> np.ndarray:
    from etr.runtime_onnx import OnnxRuntimeEtr

    return OnnxRuntimeEtr(artifact).predict(sample)
