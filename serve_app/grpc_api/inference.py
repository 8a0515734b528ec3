"""The Open Inference Protocol (KServe v2) over gRPC: its messages to and from the ETR model.

The same model, input, output and rules as the HTTP routes (``serve_app.kserve_v2``): one
input ``features`` (FP32, shape [B, 39]) answered with one output ``minutes`` (FP32, [B]).
A request's elements come in ``contents.fp32_contents`` or, as Triton's client sends them, in
``raw_input_contents`` (little-endian bytes); the answer is raw, as Triton answers, which
every client of the protocol reads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf import json_format

from etr.features import N_FEATURES
from serve_app.deployment_status import EtrModelState
from serve_app.grpc_api import kserve_v2_pb2 as v2
from serve_app.kserve_v2 import INPUT, MODEL, OUTPUT, InferRequest, check_model, model_metadata
from serve_app.pipeline.errors import InvalidInput, TooLarge


def _bad(where: str, what: str) -> InvalidInput:
    return InvalidInput.at((where,), what)


def infer_request(msg: v2.ModelInferRequest, max_rows: int) -> InferRequest:
    """The features of ``msg``. Raises NotFound for another model, InvalidInput naming what
    is wrong (another input, requested output or datatype, a shape other than [B, 39], data
    of another size, a value that is not a finite number) and TooLarge past ``max_rows``
    rows."""
    check_model(msg.model_name)
    if len(msg.inputs) != 1:
        raise _bad("inputs", f"one input, {INPUT!r}, is expected")
    tensor = msg.inputs[0]
    if tensor.name != INPUT:
        raise _bad("inputs", f"input {tensor.name!r}: the model takes {INPUT!r}")
    if tensor.datatype != "FP32":
        raise _bad("inputs", f"input {INPUT!r} is FP32, not {tensor.datatype!r}")
    shape = list(tensor.shape)
    if len(shape) != 2 or shape[1] != N_FEATURES or shape[0] < 1:
        raise _bad("inputs", f"input {INPUT!r} has shape [B, {N_FEATURES}], B >= 1; got {shape}")
    rows = shape[0]
    if rows > max_rows:
        raise TooLarge("rows", rows, max_rows)
    for wanted in msg.outputs:
        if wanted.name != OUTPUT:
            raise _bad("outputs", f"output {wanted.name!r}: the model has one output, {OUTPUT!r}")
    size = rows * N_FEATURES
    given = len(tensor.contents.fp32_contents)
    if msg.raw_input_contents:
        raw = msg.raw_input_contents[0]
        if len(msg.raw_input_contents) != 1 or given or len(raw) != 4 * size:
            raise _bad("raw_input_contents", f"input {INPUT!r}: {4 * size} bytes expected")
        features = np.frombuffer(raw, "<f4").astype(np.float32)
    elif given == size:
        features = np.asarray(tensor.contents.fp32_contents, np.float32)
    else:
        raise _bad("inputs", f"input {INPUT!r} has {given} FP32 values for its shape's {size}")
    features = features.reshape(rows, N_FEATURES)
    if not np.isfinite(features).all():
        raise _bad("inputs", f"input {INPUT!r} holds a value that is not a finite number")
    return InferRequest(features, msg.id or None, binary_output=True)


def infer_response(
    minutes: np.ndarray, version: str, request: InferRequest
) -> v2.ModelInferResponse:
    """``minutes`` (float32[B]) as the protocol's answer, raw."""
    minutes = np.asarray(minutes, np.float32)
    return v2.ModelInferResponse(
        model_name=MODEL,
        model_version=version,
        id=request.id or "",
        outputs=[
            v2.ModelInferResponse.InferOutputTensor(
                name=OUTPUT, datatype="FP32", shape=[int(minutes.size)]
            )
        ],
        raw_output_contents=[minutes.astype("<f4").tobytes()],
    )


def metadata_response(state: EtrModelState) -> v2.ModelMetadataResponse:
    """The ETR model's metadata, as ``GET /v2/models/etr`` gives it."""
    meta = model_metadata(state)
    tensor = v2.ModelMetadataResponse.TensorMetadata
    return v2.ModelMetadataResponse(
        name=meta["name"],
        versions=meta["versions"],
        platform=meta["platform"],
        inputs=[tensor(**t) for t in meta["inputs"]],
        outputs=[tensor(**t) for t in meta["outputs"]],
    )


# Triton's extensions: the HTTP routes' JSON (``serve_app.kserve_v2``) read into the messages,
# whose fields carry the JSON's names, so both transports answer from one statement.
def config_response(config: dict[str, Any]) -> v2.ModelConfigResponse:
    """``kserve_v2.model_config``'s dict as Triton's ``ModelConfigResponse``."""
    return v2.ModelConfigResponse(config=json_format.ParseDict(config, v2.ModelConfig()))


def statistics_response(stats: dict[str, Any]) -> v2.ModelStatisticsResponse:
    """``kserve_v2.model_statistics``'s dict as Triton's ``ModelStatisticsResponse``."""
    return json_format.ParseDict(stats, v2.ModelStatisticsResponse())


def index_response(index: list[dict[str, Any]]) -> v2.RepositoryIndexResponse:
    """``kserve_v2.repository_index``'s list as Triton's ``RepositoryIndexResponse``."""
    return json_format.ParseDict({"models": index}, v2.RepositoryIndexResponse())
