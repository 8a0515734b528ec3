"""Triton Inference Server serving the ETR model, for ``bench/peer_triton.py`` (the peer).

    .venv-triton/bin/python bench/triton_etr_server.py --model models/etr/1/model.onnx \
        --http-port 8500 [--max-batch 256] [--queue-delay-us 500]

PyTriton (Triton's C++ HTTP/gRPC front end and dynamic batcher, the model called in a Python
function through ONNX Runtime, as the issue that asked for this peer measured it). Runs in its
own virtualenv made with the system Python: PyTriton's backend stub links the system's
libpython. Inputs ``features`` FP32 [-1, 39], outputs ``minutes`` FP32 [-1]. Prints "ready"
once it serves; stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

import numpy as np
import onnxruntime as ort
from pytriton.decorators import batch
from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--http-port", type=int, default=8500)
    ap.add_argument("--grpc-port", type=int, default=8501)
    ap.add_argument("--metrics-port", type=int, default=8502)
    ap.add_argument("--max-batch", type=int, default=256)
    ap.add_argument("--queue-delay-us", type=int, default=500)
    args = ap.parse_args()
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name

    @batch
    def infer(features: np.ndarray) -> dict[str, np.ndarray]:
        minutes = session.run(None, {input_name: features.astype(np.float32)})[0]
        return {"minutes": np.asarray(minutes, np.float32).reshape(-1, 1)}

    config = TritonConfig(
        http_port=args.http_port, grpc_port=args.grpc_port, metrics_port=args.metrics_port
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with Triton(config=config) as triton:
        triton.bind(
            model_name="etr",
            infer_func=infer,
            inputs=[Tensor(name="features", dtype=np.float32, shape=(39,))],
            outputs=[Tensor(name="minutes", dtype=np.float32, shape=(1,))],
            config=ModelConfig(
                max_batch_size=args.max_batch,
                batcher=DynamicBatcher(max_queue_delay_microseconds=args.queue_delay_us),
            ),
            strict=True,
        )
        triton.run()
        print("ready", flush=True)
        stop.wait()
    sys.exit(0)


if __name__ == "__main__":
    main()
