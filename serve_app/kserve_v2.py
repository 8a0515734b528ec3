"""The ETR model on the Open Inference Protocol (KServe v2), as Triton and KServe serve it.

A Triton or KServe client (``tritonclient.http``, KServe's own) reaches the ETR model without a
change: ``GET /v2/health/live``, ``/v2/health/ready``, ``/v2/models/etr`` (metadata),
``/v2/models/etr/ready``, and ``POST /v2/models/etr/infer`` with one input ``features``
(FP32, shape [B, 39], the columns of ``etr.features.FEATURE_NAMES``) answered with one
output ``minutes`` (FP32, [B]). The routes run the same pipeline and admission as ``/v1/etr``
(the ``etr`` lane, the row cache); this module only reads and writes the protocol's bodies:
JSON tensors (``data`` flat in row-major order, or nested), and Triton's binary tensor
extension (``Inference-Header-Content-Length``: a JSON header, then the raw little-endian
bytes of each tensor whose ``parameters.binary_data_size`` says so), both ways.

Errors answer the protocol's way, ``{"error": "..."}``: a malformed request 400 (the
protocol's status, where the rest of the API answers 422), otherwise the status the error table
gives. ``GET /v2`` (and gRPC ``ServerMetadata``) names the server, its version and the
extensions it implements; requesting an output the model does not have is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import numpy as np

from etr.features import N_FEATURES
from etr.select import CPU_RUNTIMES
from serve_app.deployment_status import EtrModelState
from serve_app.error_answers import answer_for
from serve_app.pipeline.errors import InvalidInput, NotFound, TooLarge

PREFIX = "/v2"
MODEL = "etr"
INPUT = "features"
OUTPUT = "minutes"
HEADER_LENGTH = "inference-header-content-length"
SERVER = "orml-serve"
#: Triton's protocol extensions each transport implements (``GET /v2``, ``ServerMetadata``).
#: (The repository index is served, but not its load and unload: "model_repository" is not
#: claimed.)
HTTP_EXTENSIONS = ("binary_tensor_data", "model_configuration", "statistics")
GRPC_EXTENSIONS = ("model_configuration", "statistics")


def server_version() -> str:
    """The installed package's version ("unknown" when run from a tree not installed)."""
    try:
        return version(SERVER)
    except PackageNotFoundError:
        return "unknown"


def server_metadata(extensions: tuple[str, ...]) -> dict[str, Any]:
    """``GET /v2``: the server's name, version and extensions."""
    return {"name": SERVER, "version": server_version(), "extensions": list(extensions)}


def http_status(exc: BaseException) -> int:
    """The protocol's HTTP status of an error: 400 for a malformed request (the protocol's
    "bad request"), else the error table's."""
    return 400 if isinstance(exc, InvalidInput) else answer_for(exc).http_status


@dataclass(frozen=True)
class InferRequest:
    """features : float32[B, 39]; id : the request's own id, echoed; binary_output : answer
    ``minutes`` as raw bytes (Triton's extension) instead of JSON."""

    features: np.ndarray
    id: str | None
    binary_output: bool


def _bad(what: str) -> InvalidInput:
    return InvalidInput.at(("body",), what)


def parse_infer(body: bytes, headers: Mapping[str, str], max_rows: int) -> InferRequest:
    """The features of an infer request. Raises InvalidInput naming what is wrong (not JSON,
    another input or datatype, a shape other than [B, 39], data of another size, a value
    that is not a finite number) and TooLarge past ``max_rows`` rows."""
    header_length = headers.get(HEADER_LENGTH)
    binary = b""
    if header_length is not None:
        try:
            n = int(header_length)
        except ValueError:
            raise _bad(f"{HEADER_LENGTH} is not a number") from None
        if not 0 <= n <= len(body):
            raise _bad(f"{HEADER_LENGTH} {n} is past the body's {len(body)} bytes")
        body, binary = body[:n], body[n:]
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _bad("not JSON") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise _bad("an infer request is an object with a list of inputs")
    inputs = request["inputs"]
    if len(inputs) != 1 or not isinstance(inputs[0], dict):
        raise _bad(f"one input, {INPUT!r}, is expected")
    tensor = inputs[0]
    if tensor.get("name") != INPUT:
        raise _bad(f"input {tensor.get('name')!r}: the model takes {INPUT!r}")
    if tensor.get("datatype") != "FP32":
        raise _bad(f"input {INPUT!r} is FP32, not {tensor.get('datatype')!r}")
    shape = tensor.get("shape")
    if (
        not isinstance(shape, list)
        or len(shape) != 2
        or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)
        or shape[1] != N_FEATURES
        or shape[0] < 1
    ):
        raise _bad(f"input {INPUT!r} has shape [B, {N_FEATURES}], B >= 1; got {shape!r}")
    rows = shape[0]
    if rows > max_rows:
        raise TooLarge("rows", rows, max_rows)
    size = rows * N_FEATURES
    params = tensor.get("parameters") or {}
    if "binary_data_size" in params:
        if params["binary_data_size"] != 4 * size or len(binary) != 4 * size:
            raise _bad(f"input {INPUT!r}: {4 * size} bytes of binary data expected")
        features = np.frombuffer(binary, "<f4").reshape(rows, N_FEATURES).astype(np.float32)
    else:
        data = tensor.get("data")
        if not isinstance(data, list):
            raise _bad(f"input {INPUT!r} has no data")
        flat = _flatten(data, size)
        features = np.asarray(flat, np.float32).reshape(rows, N_FEATURES)
    if not np.isfinite(features).all():
        raise _bad(f"input {INPUT!r} holds a value that is not a finite number")
    outputs = request.get("outputs") or []
    if not isinstance(outputs, list):
        raise _bad("outputs is a list of requested outputs")
    for wanted in outputs:
        name = wanted.get("name") if isinstance(wanted, dict) else None
        if name != OUTPUT:
            raise _bad(f"output {name!r}: the model has one output, {OUTPUT!r}")
    binary_output = bool((request.get("parameters") or {}).get("binary_data_output")) or any(
        isinstance(o, dict) and (o.get("parameters") or {}).get("binary_data") for o in outputs
    )
    request_id = request.get("id")
    return InferRequest(
        features, request_id if isinstance(request_id, str) else None, binary_output
    )


def _flatten(data: list[Any], size: int) -> list[float]:
    """Row-major numbers of ``data``, flat or nested; InvalidInput past ``size`` or short."""
    out: list[float] = []
    stack = [iter(data)]
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            if isinstance(item, bool) or not isinstance(item, int | float):
                raise _bad(f"input {INPUT!r} holds {type(item).__name__}, not a number")
            if not math.isfinite(item):
                raise _bad(f"input {INPUT!r} holds a value that is not a finite number")
            out.append(float(item))
            if len(out) > size:
                raise _bad(f"input {INPUT!r} has more than its shape's {size} values")
        else:
            stack.pop()
    if len(out) != size:
        raise _bad(f"input {INPUT!r} has {len(out)} values for its shape's {size}")
    return out


def encode_infer(
    minutes: np.ndarray, version: str, request: InferRequest
) -> tuple[bytes, dict[str, str]]:
    """The infer answer's bytes and headers: ``minutes`` as JSON data, or after a JSON header
    as raw bytes where the request asked for binary output."""
    minutes = np.asarray(minutes, np.float32)
    output: dict[str, Any] = {"name": OUTPUT, "datatype": "FP32", "shape": [int(minutes.size)]}
    answer: dict[str, Any] = {"model_name": MODEL, "model_version": version}
    if request.id is not None:
        answer["id"] = request.id
    if request.binary_output:
        raw = minutes.astype("<f4").tobytes()
        output["parameters"] = {"binary_data_size": len(raw)}
        header = json.dumps({**answer, "outputs": [output]}).encode()
        return header + raw, {
            "content-type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header)),
        }
    output["data"] = [float(m) for m in minutes]
    return json.dumps({**answer, "outputs": [output]}).encode(), {
        "content-type": "application/json"
    }


#: Triton's (platform, backend) of each ETR runtime that Triton also runs; others by their name.
TRITON_PLATFORMS = {
    "onnxruntime": ("onnxruntime_onnx", "onnxruntime"),
    "tensorrt": ("tensorrt_plan", "tensorrt"),
}


def platform_of(runtime: str) -> tuple[str, str]:
    """(platform, backend) of an ETR runtime, in Triton's names where Triton has one."""
    return TRITON_PLATFORMS.get(runtime, (runtime, runtime))


def check_model(model: str) -> None:
    """NotFound unless ``model`` is the ETR model's name."""
    if model != MODEL:
        raise NotFound(f"Request for unknown model: {model!r} is not found")


def resolve_version(state: EtrModelState, model: str, version: str) -> str:
    """The loaded version a request names (``""``: the serving one). Raises NotFound for a
    model other than the ETR model or a version not loaded."""
    check_model(model)
    if not version:
        return state.serving
    if version not in state.versions:
        raise NotFound(
            f"Request for unknown model: {MODEL!r} version {version} is not found "
            f"(loaded: {', '.join(state.versions)})"
        )
    return version


def model_metadata(state: EtrModelState) -> dict[str, Any]:
    """``GET /v2/models/etr``: name, versions, platform, the input and the output."""
    return {
        "name": MODEL,
        "versions": list(state.versions),
        "platform": platform_of(state.runtime)[0],
        "inputs": [{"name": INPUT, "datatype": "FP32", "shape": [-1, N_FEATURES]}],
        "outputs": [{"name": OUTPUT, "datatype": "FP32", "shape": [-1]}],
    }


def model_config(state: EtrModelState, max_rows: int) -> dict[str, Any]:
    """``GET /v2/models/etr/config``: Triton's model configuration (its JSON form, as
    ``tritonclient`` and ``perf_analyzer`` read it). max_batch_size : the rows one request may
    carry (``max_rows``; the batcher splits it into model calls of at most the deployment's
    ``max_batch_size``); the input is [39] and the output [1] reshaped to [] per row, so a
    request's shapes are [B, 39] and [B]; dynamic batching with the batcher's wait and call
    size, or none where batching is off."""
    platform, backend = platform_of(state.runtime)
    config: dict[str, Any] = {
        "name": MODEL,
        "platform": platform,
        "backend": backend,
        "version_policy": {
            "specific": {"versions": [int(v) for v in state.versions if v.isdigit()]}
        },
        "max_batch_size": max_rows,
        "input": [{"name": INPUT, "data_type": "TYPE_FP32", "dims": [N_FEATURES]}],
        "output": [
            {"name": OUTPUT, "data_type": "TYPE_FP32", "dims": [1], "reshape": {"shape": []}}
        ],
        "instance_group": [
            {"name": MODEL, "kind": "KIND_CPU" if state.runtime in CPU_RUNTIMES else "KIND_GPU"}
        ],
    }
    if state.batching:
        config["dynamic_batching"] = {
            "preferred_batch_size": [state.max_batch_size],
            "max_queue_delay_microseconds": round(state.batch_wait_timeout_s * 1e6),
        }
    return config


def model_statistics(state: EtrModelState, model: str, version: str) -> dict[str, Any]:
    """``GET /v2/models/stats`` (``model`` and ``version`` ""), ``/v2/models/etr/stats``
    (every loaded version) or ``.../versions/V/stats``: Triton's statistics, from the totals
    the process computing the model keeps (``actors.model_stats``). Raises NotFound as
    ``resolve_version``."""
    if model or version:
        resolve_version(state, model, version)
    versions = [version] if version else list(state.versions)
    stats = []
    for v in versions:
        totals = state.stats.get(v, {})
        inference = totals.get("inference_stats", {})
        zero = {"count": 0, "ns": 0}
        stats.append(
            {
                "name": MODEL,
                "version": v,
                "last_inference": totals.get("last_inference", 0),
                "inference_count": totals.get("inference_count", 0),
                "execution_count": totals.get("execution_count", 0),
                "inference_stats": {
                    key: inference.get(key, zero)
                    for key in (
                        "success",
                        "fail",
                        "queue",
                        "compute_input",
                        "compute_infer",
                        "compute_output",
                        "cache_hit",
                        "cache_miss",
                    )
                },
                "batch_stats": [
                    {
                        "batch_size": b["batch_size"],
                        "compute_input": zero,
                        "compute_infer": b["compute_infer"],
                        "compute_output": zero,
                    }
                    for b in totals.get("batch_stats", [])
                ],
            }
        )
    return {"model_stats": stats}


def parse_index_request(body: bytes) -> bool:
    """Whether a repository index request (empty, or ``{"ready": bool}``) asks for the ready
    models only; InvalidInput otherwise."""
    if not body.strip():
        return False
    try:
        request = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _bad("not JSON") from None
    ready = request.get("ready", False) if isinstance(request, dict) else None
    if not isinstance(ready, bool):
        raise _bad('a repository index request is {"ready": true|false} or empty')
    return ready


def repository_index(state: EtrModelState, on_disk: list[str], ready_only: bool) -> list[dict]:
    """``POST /v2/repository/index``: each version of the ETR model, loaded ("READY") or in
    the repository only ("UNAVAILABLE", ``orml models load`` loads it); ``ready_only``
    lists the loaded ones."""
    index = []
    for v in sorted(set(on_disk) | set(state.versions), key=_version_order):
        if v in state.versions:
            index.append({"name": MODEL, "version": v, "state": "READY"})
        elif not ready_only:
            index.append(
                {"name": MODEL, "version": v, "state": "UNAVAILABLE", "reason": "unloaded"}
            )
    return index


def _version_order(version: str) -> tuple[int, str]:
    return (int(version), "") if version.isdigit() else (1 << 62, version)
