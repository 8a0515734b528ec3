"""Training is reproducible from the seed and beats linear regression."""

from __future__ import annotations

import numpy as np
import pytest

from etr.dataset import load_deliveries, split
from etr.train import linear_baseline, metrics, to_onnx, train


@pytest.fixture(scope="module")
def data():
    x, y = load_deliveries()
    return split(x, y)


def test_same_seed_same_metrics(data):
    a, _ = train(data, seed=3, epochs=3)
    b, _ = train(data, seed=3, epochs=3)
    ma, mb = (
        metrics(a.forward(data.test.x), data.test.y),
        metrics(b.forward(data.test.x), data.test.y),
    )
    assert {k: round(v, 3) for k, v in ma.items()} == {k: round(v, 3) for k, v in mb.items()}


def test_split_is_fixed_and_disjoint(data):
    assert (len(data.train.y), len(data.validation.y), len(data.test.y)) == (5600, 1200, 1200)
    x, y = load_deliveries()
    again = split(x, y)
    assert np.array_equal(again.test.y, data.test.y)


def test_short_training_beats_linear_and_exports_equal_onnx(data, tmp_path):
    import onnxruntime as ort

    model, _ = train(data, seed=0, epochs=60)
    ours = metrics(model.forward(data.test.x), data.test.y)["mae"]
    assert ours < metrics(linear_baseline(data), data.test.y)["mae"]
    to_onnx(model, tmp_path / "m.onnx")
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"features": data.test.x})[0]
    assert float(np.abs(got - model.forward(data.test.x)).max()) < 1e-3


def test_malformed_csv_names_the_line(tmp_path):
    bad = tmp_path / "d.csv"
    bad.write_text("time_to_delivery,hour,day,distance\n10,12,Xday,1\n")
    with pytest.raises(ValueError, match=r"d.csv:2"):
        load_deliveries(bad)
