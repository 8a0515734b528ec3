"""An ONNX interpreter over NumPy or CuPy: the same artifact on any CUDA GPU, without TensorRT.

It evaluates the graph node by node from the ONNX initialisers. Only the ops dense models need
are supported; any other op is refused when the model loads, with the op and node named.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from etr.repository import ModelArtifact
from etr.runtime import EtrRuntime


def _gemm(xp: ModuleType, attrs: dict[str, Any], a: Any, b: Any, c: Any = None) -> Any:
    if attrs.get("transA", 0):
        a = a.T
    if attrs.get("transB", 0):
        b = b.T
    y = attrs.get("alpha", 1.0) * (a @ b)
    if c is not None:
        y = y + attrs.get("beta", 1.0) * c
    return y


def _reshape(xp: ModuleType, attrs: dict[str, Any], x: Any, shape: Any) -> Any:
    dims = [int(d) for d in (shape.get() if hasattr(shape, "get") else shape)]
    dims = [x.shape[k] if d == 0 else d for k, d in enumerate(dims)]
    return x.reshape(dims)


def _flatten(xp: ModuleType, attrs: dict[str, Any], x: Any) -> Any:
    axis = attrs.get("axis", 1)
    lead = int(np.prod(x.shape[:axis])) if axis else 1
    return x.reshape(lead, -1)


OPS: dict[str, Callable[..., Any]] = {
    "Gemm": _gemm,
    "MatMul": lambda xp, at, a, b: a @ b,
    "Add": lambda xp, at, a, b: a + b,
    "Sub": lambda xp, at, a, b: a - b,
    "Mul": lambda xp, at, a, b: a * b,
    "Div": lambda xp, at, a, b: a / b,
    "Relu": lambda xp, at, x: xp.maximum(x, 0),
    "Sigmoid": lambda xp, at, x: 1 / (1 + xp.exp(-x)),
    "Tanh": lambda xp, at, x: xp.tanh(x),
    "Identity": lambda xp, at, x: x,
    "Reshape": _reshape,
    "Flatten": _flatten,
}


class ArrayEtr(EtrRuntime):
    """The ONNX graph evaluated with ``xp`` (numpy or cupy); inputs and outputs stay on device.

    Raises ValueError at load for an op outside ``OPS``.
    """

    def __init__(
        self, artifact: ModelArtifact, *, xp: ModuleType = np, max_batch: int | None = None
    ):
        import onnx
        from onnx import numpy_helper

        super().__init__(artifact.n_features, max_batch)
        self.xp = xp
        self.name = "cupy" if xp is not np else "numpy"
        self.device = "cuda" if xp is not np else "cpu"
        model = onnx.load_from_string(artifact.onnx_bytes)
        graph = model.graph
        self._nodes = []
        for node in graph.node:
            if node.op_type not in OPS:
                raise ValueError(
                    f"unsupported ONNX op {node.op_type!r} (node {node.name!r}); "
                    f"the array runtime supports {sorted(OPS)}"
                )
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            self._nodes.append((OPS[node.op_type], attrs, list(node.input), list(node.output)))
        self._weights = {t.name: xp.asarray(numpy_helper.to_array(t)) for t in graph.initializer}
        self._input = graph.input[0].name
        self._output = graph.output[0].name
        self.weights_bytes = sum(int(w.nbytes) for w in self._weights.values())

    def _run(self, features: Any) -> Any:
        xp = self.xp
        env = dict(self._weights)
        env[self._input] = xp.asarray(features)
        for fn, attrs, ins, outs in self._nodes:
            env[outs[0]] = fn(xp, attrs, *(env[i] for i in ins if i))
        return env[self._output].reshape(-1).astype(xp.float32, copy=False)
