"""The ETR model on the Open Inference Protocol: the codecs on their own (JSON and Triton's
binary tensors, the gRPC messages; every malformed input a 4xx naming it), then Triton's own
HTTP and gRPC clients against the session's app, answered with the minutes /v1/etr gives for
the same orders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from etr.features import N_FEATURES, features_from_orders
from planner import generate_round
from serve_app.deployment_status import EtrModelState
from serve_app.error_answers import answer_for
from serve_app.kserve_v2 import (
    HTTP_EXTENSIONS,
    encode_infer,
    http_status,
    model_config,
    model_metadata,
    model_statistics,
    parse_index_request,
    parse_infer,
    repository_index,
    resolve_version,
    server_metadata,
)
from serve_app.pipeline.errors import InvalidInput, NotFound, TooLarge

ROWS = np.arange(2 * N_FEATURES, dtype=np.float32).reshape(2, N_FEATURES) / 7


def request(data, shape=(2, N_FEATURES), **extra) -> bytes:
    tensor = {"name": "features", "datatype": "FP32", "shape": list(shape), "data": data}
    return json.dumps({"inputs": [tensor], **extra}).encode()


def test_json_tensors_flat_or_nested_are_read_row_major():
    for data in (ROWS.ravel().tolist(), ROWS.tolist()):
        got = parse_infer(request(data, id="r1"), {}, 10)
        assert np.array_equal(got.features, ROWS) and got.id == "r1" and not got.binary_output


def test_triton_binary_tensors_in_and_out():
    header = json.dumps(
        {
            "inputs": [
                {
                    "name": "features",
                    "datatype": "FP32",
                    "shape": [2, N_FEATURES],
                    "parameters": {"binary_data_size": ROWS.nbytes},
                }
            ],
            "outputs": [{"name": "minutes", "parameters": {"binary_data": True}}],
        }
    ).encode()
    body = header + ROWS.astype("<f4").tobytes()
    got = parse_infer(body, {"inference-header-content-length": str(len(header))}, 10)
    assert np.array_equal(got.features, ROWS) and got.binary_output
    content, headers = encode_infer(np.array([12.5, 30.0], np.float32), "1", got)
    n = int(headers["Inference-Header-Content-Length"])
    answer = json.loads(content[:n])
    assert answer["outputs"][0]["parameters"]["binary_data_size"] == 8
    assert np.frombuffer(content[n:], "<f4").tolist() == [12.5, 30.0]


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"{not json", "not JSON"),
        (request(ROWS.ravel().tolist(), shape=(2, 38)), "shape"),
        (request(ROWS.ravel().tolist()[:-1]), "77 values"),
        (request([*ROWS.ravel().tolist()[:-1], "x"]), "str"),
        (request([*ROWS.ravel().tolist()[:-1], True]), "bool"),
        (
            json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 39]}]}).encode(),
            "'x'",
        ),
        (json.dumps({"inputs": []}).encode(), "one input"),
    ],
)
def test_a_malformed_request_is_a_4xx_naming_what_is_wrong(body, match):
    """The rest of the API answers 422; the protocol's bad request is 400."""
    with pytest.raises(InvalidInput, match=match) as err:
        parse_infer(body, {}, 10)
    assert answer_for(err.value).http_status == 422
    assert http_status(err.value) == 400


def test_an_output_the_model_does_not_have_is_refused_naming_it():
    body = request(ROWS.ravel().tolist(), outputs=[{"name": "minutes"}, {"name": "eta"}])
    with pytest.raises(InvalidInput, match="output 'eta'"):
        parse_infer(body, {}, 10)
    assert parse_infer(request(ROWS.ravel().tolist(), outputs=[{"name": "minutes"}]), {}, 10)


def test_the_server_metadata_names_the_server_and_its_extensions():
    meta = server_metadata(HTTP_EXTENSIONS)
    assert meta["name"] == "orml-serve"
    assert meta["extensions"] == ["binary_tensor_data", "model_configuration", "statistics"]
    assert isinstance(meta["version"], str) and meta["version"]
    assert http_status(TooLarge("rows", 2, 1)) == 413


def test_rows_past_the_limit_are_too_large():
    with pytest.raises(TooLarge, match="rows: 2 exceeds the limit of 1"):
        parse_infer(request(ROWS.ravel().tolist()), {}, 1)


STATE = EtrModelState(
    versions=("1", "2"),
    serving="2",
    runtime="onnxruntime",
    ready=True,
    max_batch_size=256,
    batch_wait_timeout_s=0.002,
    batching=True,
    stats={
        "2": {
            "last_inference": 1_700_000_000_000,
            "inference_count": 12,
            "execution_count": 2,
            "inference_stats": {
                "success": {"count": 3, "ns": 9_000},
                "fail": {"count": 1, "ns": 500},
                "queue": {"count": 3, "ns": 1_000},
                "compute_infer": {"count": 3, "ns": 6_000},
            },
            "batch_stats": [{"batch_size": 6, "compute_infer": {"count": 2, "ns": 4_000}}],
        }
    },
)


def test_a_version_is_the_serving_one_a_loaded_one_or_not_found():
    assert resolve_version(STATE, "etr", "") == "2"
    assert resolve_version(STATE, "etr", "1") == "1"
    with pytest.raises(NotFound, match="'etr' version 3 is not found"):
        resolve_version(STATE, "etr", "3")
    with pytest.raises(NotFound, match="unknown model: 'eta' is not found") as got:
        resolve_version(STATE, "eta", "1")
    assert http_status(got.value) == 404


def test_the_model_config_is_tritons_for_a_batched_model():
    config = model_config(STATE, max_rows=2000)
    assert config["platform"] == "onnxruntime_onnx" and config["backend"] == "onnxruntime"
    assert config["max_batch_size"] == 2000  # a request's rows; [B, 39] in, [B] out
    assert config["input"] == [{"name": "features", "data_type": "TYPE_FP32", "dims": [39]}]
    assert config["output"][0]["dims"] == [1] and config["output"][0]["reshape"] == {"shape": []}
    assert config["version_policy"] == {"specific": {"versions": [1, 2]}}
    assert config["dynamic_batching"] == {
        "preferred_batch_size": [256],
        "max_queue_delay_microseconds": 2000,
    }
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    off = EtrModelState(**{**STATE.__dict__, "batching": False, "runtime": "tensorrt"})
    config = model_config(off, 10)
    assert "dynamic_batching" not in config and config["platform"] == "tensorrt_plan"
    assert config["instance_group"][0]["kind"] == "KIND_GPU"
    assert model_metadata(STATE)["platform"] == "onnxruntime_onnx"


def test_statistics_are_every_loaded_versions_or_the_one_named():
    every = model_statistics(STATE, "", "")["model_stats"]
    assert [s["version"] for s in every] == ["1", "2"]
    assert every[0]["inference_count"] == 0  # loaded, not called yet: zeros, every field
    assert every[0]["inference_stats"]["cache_hit"] == {"count": 0, "ns": 0}
    (two,) = model_statistics(STATE, "etr", "2")["model_stats"]
    assert (two["inference_count"], two["execution_count"]) == (12, 2)
    assert two["inference_stats"]["success"] == {"count": 3, "ns": 9_000}
    assert two["batch_stats"][0]["batch_size"] == 6
    assert two["batch_stats"][0]["compute_infer"] == {"count": 2, "ns": 4_000}
    assert len(model_statistics(STATE, "etr", "")["model_stats"]) == 2
    with pytest.raises(NotFound):
        model_statistics(STATE, "etr", "9")


def test_the_repository_index_lists_loaded_versions_ready_and_the_others_unavailable():
    index = repository_index(STATE, ["1", "2", "10"], ready_only=False)
    assert index == [
        {"name": "etr", "version": "1", "state": "READY"},
        {"name": "etr", "version": "2", "state": "READY"},
        {"name": "etr", "version": "10", "state": "UNAVAILABLE", "reason": "unloaded"},
    ]
    assert len(repository_index(STATE, ["1", "2", "10"], ready_only=True)) == 2
    assert parse_index_request(b"") is False and parse_index_request(b'{"ready": true}')
    with pytest.raises(InvalidInput):
        parse_index_request(b'{"ready": "yes"}')


def test_tritons_extension_messages_are_read_by_tritons_own_stubs():
    """Our messages carry Triton's field numbers: what the server sends, Triton's generated
    classes parse into the same values."""
    from google.protobuf import json_format
    from tritonclient.grpc import service_pb2 as triton

    from serve_app.grpc_api.inference import (
        config_response,
        index_response,
        statistics_response,
    )

    config = model_config(STATE, 2000)
    got = triton.ModelConfigResponse.FromString(config_response(config).SerializeToString())
    as_dict = json_format.MessageToDict(got.config, preserving_proto_field_name=True)
    assert as_dict["max_batch_size"] == 2000 and as_dict["backend"] == "onnxruntime"
    assert as_dict["input"] == [{"name": "features", "data_type": "TYPE_FP32", "dims": ["39"]}]
    assert as_dict["dynamic_batching"]["max_queue_delay_microseconds"] == "2000"
    assert as_dict["instance_group"][0]["kind"] == "KIND_CPU"
    stats = model_statistics(STATE, "etr", "2")
    got = triton.ModelStatisticsResponse.FromString(statistics_response(stats).SerializeToString())
    assert got.model_stats[0].inference_stats.success.ns == 9_000
    assert got.model_stats[0].batch_stats[0].compute_infer.count == 2
    index = repository_index(STATE, ["1", "2", "3"], ready_only=False)
    got = triton.RepositoryIndexResponse.FromString(index_response(index).SerializeToString())
    assert [(m.version, m.state) for m in got.models] == [
        ("1", "READY"),
        ("2", "READY"),
        ("3", "UNAVAILABLE"),
    ]
    # and an InferParameter of each kind the protocol has, both ways
    from serve_app.grpc_api import kserve_v2_pb2 as v2

    for field, value in [("double_param", 0.25), ("uint64_param", 1 << 63), ("bool_param", True)]:
        ours = v2.InferParameter(**{field: value})
        theirs = triton.InferParameter.FromString(ours.SerializeToString())
        assert getattr(theirs, field) == value
        assert v2.InferParameter.FromString(theirs.SerializeToString()) == ours


def test_routes_with_a_model_and_a_version_match_their_template():
    from serve_app.http.routes import UNMATCHED, body_endpoint, route_label

    assert route_label({"path": "/v2/models/etr/versions/1/infer"}) == (
        "/v2/models/{model}/versions/{version}/infer"
    )
    assert body_endpoint("/v2/models/etr/versions/1/infer") == "etr"
    assert body_endpoint("/v2/models/x/infer") == "etr"
    assert route_label({"path": "/v2/models/stats"}) == "/v2/models/stats"
    assert route_label({"path": "/v2/models/etr"}) == "/v2/models/{model}"
    assert route_label({"path": "/v2/models/etr/versions/1/infer/x"}) == UNMATCHED


def assert_minutes_of_v1_etr(minutes: np.ndarray, serve_url: str, orders: list) -> None:
    """``minutes`` are what ``POST /v1/etr`` answers for ``orders``."""
    import httpx

    from serve_app.schemas import EtrRequest, OrderIn

    want = httpx.post(
        f"{serve_url}/v1/etr",
        content=EtrRequest(orders=[OrderIn.from_domain(o) for o in orders]).model_dump_json(),
        headers={"content-type": "application/json"},
        timeout=30,
    ).json()["minutes"]
    assert minutes.shape == (len(orders),)
    assert minutes == pytest.approx(np.asarray(want, np.float32), abs=1e-3)


def test_tritons_http_client_calls_every_method_and_extension(serve_url):
    import tritonclient.http as triton
    from tritonclient.utils import InferenceServerException

    orders = list(generate_round(1, 6, seed=31).orders)
    features = features_from_orders(orders)
    client = triton.InferenceServerClient(serve_url.removeprefix("http://"))
    assert client.is_server_live() and client.is_server_ready()
    server = client.get_server_metadata()
    assert server["name"] == "orml-serve"
    assert server["extensions"] == ["binary_tensor_data", "model_configuration", "statistics"]
    meta = client.get_model_metadata("etr")
    assert meta["inputs"][0] == {"name": "features", "datatype": "FP32", "shape": [-1, 39]}
    (version,) = meta["versions"]  # the session's app loads one version
    assert client.get_model_metadata("etr", version) == meta
    assert client.is_model_ready("etr") and client.is_model_ready("etr", version)
    assert not client.is_model_ready("etr", "99") and not client.is_model_ready("other")
    config = client.get_model_config("etr")
    assert config["max_batch_size"] == 300  # the app's limits.max_orders: rows per request
    assert config["input"] == [{"name": "features", "data_type": "TYPE_FP32", "dims": [39]}]
    assert client.get_model_config("etr", version) == config
    index = client.get_model_repository_index()
    assert {"name": "etr", "version": version, "state": "READY"} in index
    assert all(m["state"] == "UNAVAILABLE" for m in index if m["version"] != version)
    before = client.get_inference_statistics("etr")["model_stats"][0]

    tensor = triton.InferInput("features", list(features.shape), "FP32")
    tensor.set_data_from_numpy(features, binary_data=True)
    wanted = [triton.InferRequestedOutput("minutes")]
    got = client.infer("etr", [tensor], outputs=wanted, request_id="h1")
    assert got.get_response()["id"] == "h1" and got.get_response()["model_version"] == version
    assert_minutes_of_v1_etr(got.as_numpy("minutes"), serve_url, orders)
    pinned = client.infer("etr", [tensor], model_version=version)
    assert np.array_equal(pinned.as_numpy("minutes"), got.as_numpy("minutes"))

    after = client.get_inference_statistics("etr", version)["model_stats"][0]
    assert after["version"] == version
    assert (
        after["inference_stats"]["success"]["count"]
        >= before["inference_stats"]["success"]["count"] + 2
    )
    assert after["inference_count"] >= before["inference_count"] + 2 * len(orders)
    assert after["inference_stats"]["compute_infer"]["ns"] > 0 and after["batch_stats"]
    every = client.get_inference_statistics()["model_stats"]
    assert [s["name"] for s in every] == ["etr"]

    # Errors: the protocol's status and body, which the client reads as its exception.
    unknown = [triton.InferRequestedOutput("eta")]
    for call, status, message in [
        (lambda: client.get_model_metadata("other"), "404", "unknown model: 'other'"),
        (lambda: client.get_model_config("etr", "99"), "404", "'etr' version 99 is not found"),
        (lambda: client.infer("etr", [tensor], model_version="99"), "404", "version '99'"),
        (lambda: client.infer("other", [tensor]), "404", "unknown model: 'other'"),
        (lambda: client.infer("etr", [tensor], outputs=unknown), "400", "output 'eta'"),
        (lambda: client.get_inference_statistics("etr", "99"), "404", "version 99"),
        (lambda: client.load_model("etr"), "404", "Not Found"),
    ]:
        with pytest.raises(InferenceServerException, match=message) as err:
            call()
        assert err.value.status() == status, message
    bad = triton.InferInput("features", [1, 38], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 38), np.float32))
    with pytest.raises(InferenceServerException, match="shape") as err:
        client.infer("etr", [bad])
    assert err.value.status() == "400"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "error"),
    [
        ("POST", "/v2/models/etr/infer", b"{not json", 400, "body: not JSON"),
        ("GET", "/v2/models/other", None, 404, "Request for unknown model: 'other' is not found"),
        ("GET", "/v2/models/other/ready", None, 404, "unknown model: 'other'"),
        ("GET", "/v2/models/etr/versions/99/stats", None, 404, "'etr' version 99 is not found"),
        ("POST", "/v2/models/etr/versions/99/infer", None, 404, "version '99' is not loaded"),
        ("POST", "/v2/repository/models/etr/load", b"{}", 404, "Not Found"),
        ("POST", "/v2/repository/index", b'{"ready": 1}', 400, "ready"),
        ("GET", "/v2/models/etr/infer", None, 405, "Method Not Allowed"),
    ],
)
def test_v2_errors_answer_the_protocols_status_and_body(
    serve_url, method, path, body, status, error
):
    import httpx

    if path.endswith("/99/infer"):
        body = request(ROWS.ravel().tolist())
    got = httpx.request(method, f"{serve_url}{path}", content=body, timeout=30)
    assert got.status_code == status
    assert set(got.json()) == {"error"} and error in got.json()["error"]


def grpc_request(features: np.ndarray, raw: bool = True, **extra):
    from serve_app.grpc_api import kserve_v2_pb2 as v2

    msg = v2.ModelInferRequest(model_name="etr", id="r7", **extra)
    tensor = msg.inputs.add(name="features", datatype="FP32", shape=list(features.shape))
    if raw:
        msg.raw_input_contents.append(features.astype("<f4").tobytes())
    else:
        tensor.contents.fp32_contents.extend(features.ravel().tolist())
    return msg


@pytest.mark.parametrize("raw", [True, False])
def test_grpc_tensors_raw_or_typed_are_read_and_answered_raw(raw):
    from serve_app.grpc_api.inference import infer_request, infer_response

    got = infer_request(grpc_request(ROWS, raw), 10)
    assert np.array_equal(got.features, ROWS) and got.id == "r7"
    answer = infer_response(np.array([1.5, 2.5], np.float32), "v3", got)
    assert answer.id == "r7" and answer.model_version == "v3"
    assert list(answer.outputs[0].shape) == [2] and answer.outputs[0].name == "minutes"
    assert np.frombuffer(answer.raw_output_contents[0], "<f4").tolist() == [1.5, 2.5]


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda m: setattr(m.inputs[0], "name", "x"), "takes 'features'"),
        (lambda m: setattr(m.inputs[0], "datatype", "FP64"), "is FP32"),
        (lambda m: m.inputs[0].shape.__setitem__(1, 38), "shape"),
        (lambda m: m.raw_input_contents.__setitem__(0, b"\0" * 12), "bytes expected"),
        (lambda m: m.raw_input_contents.append(b""), "bytes expected"),
        (lambda m: m.inputs.add(name="features"), "one input"),
        (lambda m: m.outputs.add(name="eta"), "output 'eta'"),
    ],
)
def test_a_malformed_grpc_infer_request_is_invalid_naming_what_is_wrong(edit, match):
    import grpc

    from serve_app.grpc_api.inference import infer_request

    msg = grpc_request(ROWS)
    edit(msg)
    with pytest.raises(InvalidInput, match=match) as got:
        infer_request(msg, 10)
    assert answer_for(got.value).grpc_code == grpc.StatusCode.INVALID_ARGUMENT


def test_another_model_over_grpc_is_not_found():
    import grpc

    from serve_app.grpc_api.inference import infer_request

    msg = grpc_request(ROWS)
    msg.model_name = "other"
    with pytest.raises(NotFound, match="unknown model: 'other'") as got:
        infer_request(msg, 10)
    assert answer_for(got.value).grpc_code == grpc.StatusCode.NOT_FOUND


def test_grpc_values_that_are_not_finite_and_rows_past_the_limit_are_refused():
    from serve_app.grpc_api.inference import infer_request

    bad = ROWS.copy()
    bad[1, 3] = np.nan
    with pytest.raises(InvalidInput, match="not a finite number"):
        infer_request(grpc_request(bad, raw=False), 10)
    with pytest.raises(TooLarge, match="rows: 2 exceeds the limit of 1"):
        infer_request(grpc_request(ROWS), 1)


def test_tritons_grpc_client_calls_every_method_and_extension(serve_url, grpc_address):
    import grpc
    import tritonclient.grpc as triton
    from tritonclient.utils import InferenceServerException

    orders = list(generate_round(1, 6, seed=32).orders)
    features = features_from_orders(orders)
    client = triton.InferenceServerClient(grpc_address)
    # The session's cluster may run other apps beside it: Serve's gRPC proxy then needs the
    # app's name (with one app, as deployed, a client sends nothing of its own).
    app = {"application": "orml"}
    assert client.is_server_live(headers=app) and client.is_server_ready(headers=app)
    server = client.get_server_metadata(headers=app)
    assert server.name == "orml-serve"
    assert list(server.extensions) == ["model_configuration", "statistics"]
    meta = client.get_model_metadata("etr", headers=app)
    assert (meta.inputs[0].name, meta.inputs[0].datatype, list(meta.inputs[0].shape)) == (
        "features",
        "FP32",
        [-1, 39],
    )
    (version,) = meta.versions
    assert client.get_model_metadata("etr", version, headers=app) == meta
    assert client.is_model_ready("etr", headers=app)
    assert client.is_model_ready("etr", version, headers=app)
    # as Triton: a model or version not served is not ready, not an error
    assert not client.is_model_ready("etr", "99", headers=app)
    assert not client.is_model_ready("other", headers=app)
    config = client.get_model_config("etr", headers=app, as_json=True)["config"]
    assert config["max_batch_size"] == 300 and config["input"][0]["dims"] == ["39"]
    index = client.get_model_repository_index(headers=app, as_json=True)["models"]
    assert {"name": "etr", "version": version, "state": "READY"} in index

    tensor = triton.InferInput("features", list(features.shape), "FP32")
    tensor.set_data_from_numpy(features)
    # parameters of every kind the protocol has (double and uint64 among them) are accepted
    parameters = {"a": 0.5, "b": 7, "c": "x", "d": True}
    got = client.infer("etr", [tensor], request_id="q1", headers=app, parameters=parameters)
    assert got.get_response().id == "q1" and got.get_response().model_version == version
    assert_minutes_of_v1_etr(got.as_numpy("minutes"), serve_url, orders)
    pinned = client.infer("etr", [tensor], model_version=version, headers=app)
    assert np.array_equal(pinned.as_numpy("minutes"), got.as_numpy("minutes"))
    stats = client.get_inference_statistics("etr", version, headers=app).model_stats[0]
    assert stats.inference_stats.success.count >= 2 and stats.inference_count >= 12

    bad = triton.InferInput("features", [1, 38], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 38), np.float32))
    for call, status, message in [
        (lambda: client.infer("etr", [bad], headers=app), "INVALID_ARGUMENT", "shape"),
        (lambda: client.infer("other", [tensor], headers=app), "NOT_FOUND", "'other'"),
        (
            lambda: client.infer("etr", [tensor], model_version="99", headers=app),
            "NOT_FOUND",
            "version '99'",
        ),
        (lambda: client.get_model_metadata("other", headers=app), "NOT_FOUND", "'other'"),
        (lambda: client.get_model_config("etr", "99", headers=app), "NOT_FOUND", "version 99"),
        (
            lambda: client.get_inference_statistics("other", headers=app),
            "NOT_FOUND",
            "'other'",
        ),
        (lambda: client.load_model("etr", headers=app), "UNIMPLEMENTED", ""),
    ]:
        with pytest.raises(InferenceServerException, match=message) as err:
            call()
        assert err.value.status() == f"StatusCode.{status}", message
        assert getattr(grpc.StatusCode, status)
