"""ONNX Runtime on the CPU: the default ETR runtime where no GPU is present."""

from __future__ import annotations

from typing import Any

import numpy as np

from etr.repository import ModelArtifact
from etr.runtime import EtrRuntime


class OnnxRuntimeEtr(EtrRuntime):
    """``onnxruntime.InferenceSession`` on ``CPUExecutionProvider``.

    intra_op_threads : threads per call (0 = ONNX Runtime's default, one per core). Default 1:
    the model is small and called from a serving process's event loop; with ONNX Runtime's
    default on two cores, a second thread spins beside every call of a few dozen rows and
    takes the CPU the serving process needs (``bench/peer_triton.py`` shows it). Where more
    are set, idle ones sleep instead of spinning.
    """

    name = "onnxruntime"
    device = "cpu"

    def __init__(
        self, artifact: ModelArtifact, *, max_batch: int | None = None, intra_op_threads: int = 1
    ) -> None:
        import onnxruntime as ort

        super().__init__(artifact.n_features, max_batch)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            artifact.onnx_bytes, sess_options=opts, providers=["CPUExecutionProvider"]
        )
        self._input = self._session.get_inputs()[0].name
        self._output = self._session.get_outputs()[0].name

    def _run(self, features: Any) -> Any:
        x = features.get() if hasattr(features, "get") else np.asarray(features)
        return self._session.run([self._output], {self._input: x})[0].reshape(-1)
