"""Train the ETR model (an MLP, in NumPy) and write a versioned ONNX artifact.

    python -m etr.train [--version 1] [--seed 0] [--epochs 500] [--out models/etr]

Model: 39 features -> 64 -> 32 -> 1 (ReLU), inputs standardised (folded into the first layer
on export), target in minutes (standardised while training), Adam (lr 1e-3, batch 64, weight
decay 1e-2, chosen on validation MAE) on mean squared error, early stopping on validation MAE.
Baselines in the same run: the training mean, and least-squares linear regression. Prints
progress; writes ``<out>/<version>/model.onnx``, ``metadata.json``, ``model_card.md`` and
``sample_features.npy`` (256 test rows for warm-up and precision checks). Serving never imports
this module.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from etr.dataset import DEFAULT_CSV, Dataset, load_deliveries, split
from etr.features import FEATURE_NAMES, N_FEATURES

HIDDEN = (64, 32)


@dataclass
class Mlp:
    weights: list[np.ndarray]  # float64[in, out] per layer
    biases: list[np.ndarray]
    x_mean: np.ndarray
    x_std: np.ndarray
    y_mean: float
    y_std: float

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Minutes, float64[B]."""
        h = (x - self.x_mean) / self.x_std
        for k, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if k < len(self.weights) - 1:
                h = np.maximum(h, 0.0)
        return h[:, 0] * self.y_std + self.y_mean


def metrics(pred: np.ndarray, y: np.ndarray) -> dict[str, float]:
    err = np.abs(pred.astype(np.float64) - y)
    return {
        "mae": float(err.mean()),
        "rmse": float(np.sqrt((err**2).mean())),
        "p90_abs": float(np.quantile(err, 0.9)),
    }


def linear_baseline(data: Dataset) -> np.ndarray:
    """Least squares with an intercept, fitted on train; test predictions."""
    a = np.c_[data.train.x.astype(np.float64), np.ones(len(data.train.y))]
    coef, *_ = np.linalg.lstsq(a, data.train.y.astype(np.float64), rcond=None)
    return np.c_[data.test.x.astype(np.float64), np.ones(len(data.test.y))] @ coef


def train(
    data: Dataset,
    *,
    seed: int = 0,
    epochs: int = 500,
    batch: int = 64,
    lr: float = 1e-3,
    weight_decay: float = 1e-2,
    patience: int = 60,
    log=None,
) -> tuple[Mlp, dict]:
    """Deterministic for a given seed (NumPy only). Returns the best-on-validation model."""
    rng = np.random.default_rng(seed)
    x = data.train.x.astype(np.float64)
    y = data.train.y.astype(np.float64)
    x_mean, x_std = x.mean(axis=0), x.std(axis=0)
    x_std[x_std < 1e-8] = 1.0
    y_mean, y_std = float(y.mean()), float(y.std())
    xs, ys = (x - x_mean) / x_std, (y - y_mean) / y_std
    sizes = (N_FEATURES, *HIDDEN, 1)
    ws = [rng.normal(0, np.sqrt(2.0 / a), (a, b)) for a, b in itertools.pairwise(sizes)]
    bs = [np.zeros(b) for b in sizes[1:]]
    params = ws + bs
    m1 = [np.zeros_like(p) for p in params]
    m2 = [np.zeros_like(p) for p in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    model = Mlp(ws, bs, x_mean, x_std, y_mean, y_std)
    best = (np.inf, None, 0)
    step = 0
    history = []
    for epoch in range(epochs):
        order = rng.permutation(len(ys))
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            acts = [xs[idx]]
            for k, (w, b) in enumerate(zip(ws, bs, strict=True)):
                z = acts[-1] @ w + b
                acts.append(np.maximum(z, 0.0) if k < len(ws) - 1 else z)
            grad = 2.0 * (acts[-1][:, 0] - ys[idx])[:, None] / len(idx)
            gw, gb = [None] * len(ws), [None] * len(ws)
            for k in range(len(ws) - 1, -1, -1):
                gw[k] = acts[k].T @ grad + weight_decay * ws[k]
                gb[k] = grad.sum(axis=0)
                if k:
                    grad = (grad @ ws[k].T) * (acts[k] > 0)
            step += 1
            for p, g, a, v in zip(params, gw + gb, m1, m2, strict=True):
                a *= b1
                a += (1 - b1) * g
                v *= b2
                v += (1 - b2) * g * g
                p -= lr * (a / (1 - b1**step)) / (np.sqrt(v / (1 - b2**step)) + eps)
        val_mae = metrics(model.forward(data.validation.x), data.validation.y)["mae"]
        history.append(val_mae)
        if val_mae < best[0] - 1e-4:
            best = (val_mae, ([w.copy() for w in ws], [b.copy() for b in bs]), epoch)
        if log and (epoch % 25 == 0 or epoch == epochs - 1):
            log(f"epoch {epoch:4d}  validation MAE {val_mae:.3f} min  (best {best[0]:.3f})")
        if epoch - best[2] >= patience:
            if log:
                log(f"early stop at epoch {epoch} (best epoch {best[2]})")
            break
    if best[1] is not None:
        ws[:], bs[:] = best[1]
    return Mlp(ws, bs, x_mean, x_std, y_mean, y_std), {
        "epochs_run": len(history),
        "best_epoch": best[2],
        "best_validation_mae": best[0],
    }


def to_onnx(model: Mlp, path: Path) -> bytes:
    """Export: features float32[batch, 39] -> minutes float32[batch]; returns the bytes written.

    Standardisation is folded into the first Gemm, the target scale into the last.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    ws = [w.copy() for w in model.weights]
    bs = [b.copy() for b in model.biases]
    ws[0] = ws[0] / model.x_std[:, None]
    bs[0] = bs[0] - (model.x_mean / model.x_std) @ model.weights[0]
    ws[-1] = ws[-1] * model.y_std
    bs[-1] = bs[-1] * model.y_std + model.y_mean
    inits, nodes = [], []
    h = "features"
    for k, (w, b) in enumerate(zip(ws, bs, strict=True)):
        inits += [
            numpy_helper.from_array(w.astype(np.float32), f"W{k}"),
            numpy_helper.from_array(b.astype(np.float32), f"B{k}"),
        ]
        out = f"gemm{k}"
        nodes.append(helper.make_node("Gemm", [h, f"W{k}", f"B{k}"], [out], name=f"dense{k}"))
        if k < len(ws) - 1:
            nodes.append(helper.make_node("Relu", [out], [f"relu{k}"], name=f"relu{k}"))
            out = f"relu{k}"
        h = out
    inits.append(numpy_helper.from_array(np.array([-1], np.int64), "flat"))
    nodes.append(helper.make_node("Reshape", [h, "flat"], ["minutes"], name="flatten"))
    graph = helper.make_graph(
        nodes,
        "etr_mlp",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", N_FEATURES])],
        [helper.make_tensor_value_info("minutes", TensorProto.FLOAT, ["batch"])],
        inits,
    )
    proto = helper.make_model(
        graph, producer_name="orml-serve", opset_imports=[helper.make_opsetid("", 17)]
    )
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    blob = proto.SerializeToString()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)
    return blob


MODEL_CARD = """# ETR model v{version}

Predicts minutes from order to delivery. ONNX, opset 17: `features float32[batch, 39]` ->
`minutes float32[batch]`. Graph: Gemm-Relu-Gemm-Relu-Gemm-Reshape ({params:,} parameters,
{size:,} bytes; sha256 `{sha}`).

## Data
{source}: {n} real orders of one restaurant; target `time_to_delivery` (minutes). Features
(`etr/features.py`): hour, hour on the 24 h circle, one-hot day, straight-line distance (miles),
27 menu-item counts and their total. No simulated features.

Split: seeded shuffle (seed {split_seed}), train {n_train} / validation {n_val} / test {n_test}.

## Training
`python -m etr.train --version {version} --seed {seed}`: NumPy MLP {hidden}, ReLU, Adam (lr
{lr}), batch 64, weight decay 1e-2, MSE on the standardised target, early stopping on
validation MAE (best epoch {best_epoch} of {epochs_run}). Deterministic for the seed.

## Test metrics (minutes; baselines computed in the same run)

| model | MAE | RMSE | p90 abs error |
|---|---|---|---|
| mean predictor | {mean[mae]:.3f} | {mean[rmse]:.3f} | {mean[p90_abs]:.3f} |
| linear regression | {linear[mae]:.3f} | {linear[rmse]:.3f} | {linear[p90_abs]:.3f} |
| **this model** | **{model[mae]:.3f}** | **{model[rmse]:.3f}** | **{model[p90_abs]:.3f}** |

MAE is {gain:.1f}% lower than linear regression's.

## Limits
One restaurant's history; distances are straight lines; no live traffic, weather or courier
state. Expect larger errors elsewhere until retrained on the platform's own deliveries.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="train the ETR model and write its ONNX artifact")
    ap.add_argument("--version", default="1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=500)
    ap.add_argument("--data", type=Path, default=DEFAULT_CSV)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "models/etr")
    args = ap.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    x, y = load_deliveries(args.data)
    data = split(x, y)
    log(
        f"data: {len(y)} rows -> train {len(data.train.y)}, validation {len(data.validation.y)}, "
        f"test {len(data.test.y)}"
    )
    model, info = train(data, seed=args.seed, epochs=args.epochs, log=log)
    results = {
        "mean": metrics(np.full(len(data.test.y), data.train.y.mean()), data.test.y),
        "linear": metrics(linear_baseline(data), data.test.y),
        "model": metrics(model.forward(data.test.x), data.test.y),
    }
    gain = 100.0 * (1 - results["model"]["mae"] / results["linear"]["mae"])
    out_dir = args.out / args.version
    blob = to_onnx(model, out_dir / "model.onnx")
    sha = hashlib.sha256(blob).hexdigest()
    n_params = sum(w.size + b.size for w, b in zip(model.weights, model.biases, strict=True))
    meta = {
        "name": "etr",
        "version": args.version,
        "input": {"name": "features", "shape": ["batch", N_FEATURES], "dtype": "float32"},
        "output": {"name": "minutes", "shape": ["batch"], "dtype": "float32"},
        "feature_names": list(FEATURE_NAMES),
        "sha256": sha,
        "size_bytes": len(blob),
        "parameters": int(n_params),
        "seed": args.seed,
        "split": {
            "seed": 20261121,
            "train": len(data.train.y),
            "validation": len(data.validation.y),
            "test": len(data.test.y),
        },
        "test_metrics_minutes": results,
        "mae_gain_vs_linear_pct": gain,
        **info,
    }
    (out_dir / "metadata.json").write_text(json.dumps(meta, indent=2) + "\n")
    # Rows for warm-up, health checks and precision checks (FP16) of the runtimes.
    np.save(out_dir / "sample_features.npy", data.test.x[:256].astype(np.float32))
    card = MODEL_CARD.format(
        version=args.version,
        params=n_params,
        size=len(blob),
        sha=sha,
        source=data.source,
        n=len(y),
        split_seed=20261121,
        n_train=len(data.train.y),
        n_val=len(data.validation.y),
        n_test=len(data.test.y),
        seed=args.seed,
        hidden=" -> ".join(map(str, (N_FEATURES, *HIDDEN, 1))),
        lr=1e-3,
        gain=gain,
        **info,
        **results,
    )
    (out_dir / "model_card.md").write_text(card)
    print(
        json.dumps(
            {
                "version": args.version,
                "test": results,
                "mae_gain_vs_linear_pct": gain,
                "seconds": round(time.perf_counter() - t0, 1),
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
