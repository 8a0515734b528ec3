"""ETR runtimes: one interface, equal answers, clear errors on bad input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from etr import load_artifact, load_runtime
from etr.dataset import load_deliveries, split
from etr.repository import ModelArtifact
from etr.runtime_array import ArrayEtr
from etr.runtime_tensorrt import tensorrt_available


@pytest.fixture(scope="module")
def artifact() -> ModelArtifact:
    return load_artifact("etr")


@pytest.fixture(scope="module")
def test_split():
    x, y = load_deliveries()
    return split(x, y).test


def test_artifact_matches_its_metadata(artifact):
    meta = artifact.metadata
    assert (
        meta["test_metrics_minutes"]["model"]["mae"] < meta["test_metrics_minutes"]["linear"]["mae"]
    )
    assert artifact.n_features == 39 and len(meta["feature_names"]) == 39


def test_array_runtime_equals_onnxruntime_on_the_test_split(artifact, test_split):
    ort = load_runtime(artifact, "onnxruntime")
    arr = load_runtime(artifact, "numpy")
    a, b = ort.predict(test_split.x), arr.predict(test_split.x)
    assert a.shape == b.shape == (len(test_split.y),) and a.dtype == b.dtype == np.float32
    assert float(np.abs(a - b).max()) <= 1e-3
    mae = float(np.abs(a - test_split.y).mean())
    assert mae == pytest.approx(artifact.metadata["test_metrics_minutes"]["model"]["mae"], abs=1e-3)


@pytest.mark.parametrize("runtime", ["onnxruntime", "numpy"])
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.zeros((2, 5), np.float32), "expected 39 features per row, got 5"),
        (np.zeros((0, 39), np.float32), "empty batch"),
        (np.zeros(39, np.float32), "must be 2-D"),
        (np.where(np.eye(3, 39) > 0, np.nan, 0).astype(np.float32), "NaN or infinite"),
        (np.full((2, 39), np.inf, np.float32), "NaN or infinite"),
    ],
)
def test_bad_input_is_a_clear_value_error(artifact, runtime, bad, message):
    with pytest.raises(ValueError, match=message):
        load_runtime(artifact, runtime).predict(bad)


def test_max_batch_is_enforced(artifact):
    rt = load_runtime(artifact, "onnxruntime", max_batch=4)
    assert rt.predict(np.zeros((4, 39), np.float32)).shape == (4,)
    with pytest.raises(ValueError, match="exceeds max_batch 4"):
        rt.predict(np.zeros((5, 39), np.float32))


def test_unsupported_op_is_refused_at_load(artifact):
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["features"], ["minutes"], name="sm")],
        "g",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 39])],
        [helper.make_tensor_value_info("minutes", TensorProto.FLOAT, ["batch", 39])],
    )
    blob = helper.make_model(graph).SerializeToString()
    fake = ModelArtifact("etr", "x", artifact.path, blob, artifact.metadata)
    with pytest.raises(ValueError, match="unsupported ONNX op 'Softmax'"):
        ArrayEtr(fake)


def test_unknown_or_unavailable_runtime(artifact):
    with pytest.raises(ValueError, match="unknown ETR runtime"):
        load_runtime(artifact, "tflite")  # type: ignore[arg-type]
    if not tensorrt_available():
        with pytest.raises(RuntimeError, match="TensorRT"):
            load_runtime(artifact, "tensorrt")


def test_auto_picks_onnxruntime_without_a_gpu(artifact):
    from kernels.backend import cupy_available

    if cupy_available():
        pytest.skip("a GPU is present")
    assert load_runtime(artifact).name == "onnxruntime"


def test_tampered_artifact_is_refused(tmp_path, artifact):
    bad = tmp_path / "etr" / "1"
    bad.mkdir(parents=True)
    for f in ("metadata.json", "model_card.md"):
        (bad / f).write_bytes((artifact.path / f).read_bytes())
    (bad / "model.onnx").write_bytes(artifact.onnx_bytes + b"x")
    with pytest.raises(ValueError, match="sha256"):
        load_artifact("etr", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="no version"):
        load_artifact("etr", "9", root=tmp_path)


@pytest.mark.gpu
def test_cupy_runtime_equals_onnxruntime(artifact, test_split):
    arr = load_runtime(artifact, "cupy")
    got = arr.predict(test_split.x).get()
    want = load_runtime(artifact, "onnxruntime").predict(test_split.x)
    assert float(np.abs(got - want).max()) <= 1e-3


@pytest.mark.skipif(
    not tensorrt_available(),
    reason="TensorRT is not installable from the "
    "registries reachable here; needs tensorrt and a GPU",
)
def test_tensorrt_engine_is_cached_and_accurate(artifact, test_split, tmp_path):
    from etr.runtime_tensorrt import TensorRTEtr

    first = TensorRTEtr(artifact, max_batch=2048, cache_dir=tmp_path)
    want = load_runtime(artifact, "onnxruntime").predict(test_split.x)
    got = first.predict(test_split.x).get()
    assert float(np.abs(got - want).max()) <= 0.05
    second = TensorRTEtr(artifact, max_batch=2048, cache_dir=tmp_path)
    assert second.engine_path == first.engine_path and len(list(tmp_path.iterdir())) >= 1


def test_onnx_artifact_has_a_dynamic_batch_axis(artifact):
    model = onnx.load_from_string(artifact.onnx_bytes)
    dim0 = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim0.dim_param == "batch"
