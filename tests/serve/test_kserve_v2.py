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
from serve_app.error_answers import answer_for
from serve_app.kserve_v2 import (
    HTTP_EXTENSIONS,
    encode_infer,
    http_status,
    parse_infer,
    server_metadata,
)
from serve_app.pipeline.errors import InvalidInput, TooLarge

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
    assert meta["name"] == "orml-serve" and meta["extensions"] == ["binary_tensor_data"]
    assert isinstance(meta["version"], str) and meta["version"]
    assert http_status(TooLarge("rows", 2, 1)) == 413


def test_rows_past_the_limit_are_too_large():
    with pytest.raises(TooLarge, match="rows: 2 exceeds the limit of 1"):
        parse_infer(request(ROWS.ravel().tolist()), {}, 1)


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


def test_tritons_http_client_gets_the_minutes_of_v1_etr(serve_url):
    import tritonclient.http as triton

    orders = list(generate_round(1, 6, seed=31).orders)
    features = features_from_orders(orders)
    host = serve_url.removeprefix("http://")
    client = triton.InferenceServerClient(host)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("etr")
    meta = client.get_model_metadata("etr")
    assert meta["inputs"][0] == {"name": "features", "datatype": "FP32", "shape": [-1, 39]}
    tensor = triton.InferInput("features", list(features.shape), "FP32")
    tensor.set_data_from_numpy(features, binary_data=True)
    got = client.infer("etr", [tensor], outputs=[triton.InferRequestedOutput("minutes")])
    minutes = got.as_numpy("minutes")
    assert_minutes_of_v1_etr(minutes, serve_url, orders)
    # and a malformed request is the client's error, named
    bad = triton.InferInput("features", [1, 38], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 38), np.float32))
    with pytest.raises(Exception, match="shape"):
        client.infer("etr", [bad])
    with pytest.raises(Exception, match="output 'eta'"):
        client.infer("etr", [tensor], outputs=[triton.InferRequestedOutput("eta")])
    server = client.get_server_metadata()
    assert server["name"] == "orml-serve" and "binary_tensor_data" in server["extensions"]


def test_a_malformed_v2_request_is_400_with_the_protocols_error_body(serve_url):
    import httpx

    got = httpx.post(f"{serve_url}/v2/models/etr/infer", content=b"{not json", timeout=30)
    assert got.status_code == 400 and got.json() == {"error": "body: not JSON"}


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
        (lambda m: setattr(m, "model_name", "other"), "no model 'other'"),
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


def test_grpc_values_that_are_not_finite_and_rows_past_the_limit_are_refused():
    from serve_app.grpc_api.inference import infer_request

    bad = ROWS.copy()
    bad[1, 3] = np.nan
    with pytest.raises(InvalidInput, match="not a finite number"):
        infer_request(grpc_request(bad, raw=False), 10)
    with pytest.raises(TooLarge, match="rows: 2 exceeds the limit of 1"):
        infer_request(grpc_request(ROWS), 1)


def test_tritons_grpc_client_gets_the_minutes_of_v1_etr(serve_url, grpc_address):
    import tritonclient.grpc as triton
    from tritonclient.utils import InferenceServerException

    orders = list(generate_round(1, 6, seed=32).orders)
    features = features_from_orders(orders)
    client = triton.InferenceServerClient(grpc_address)
    # The session's cluster may run other apps beside it: Serve's gRPC proxy then needs the
    # app's name (with one app, as deployed, a client sends nothing of its own).
    app = {"application": "orml"}
    assert client.is_server_live(headers=app) and client.is_server_ready(headers=app)
    assert client.is_model_ready("etr", headers=app)
    meta = client.get_model_metadata("etr", headers=app)
    assert (meta.inputs[0].name, meta.inputs[0].datatype, list(meta.inputs[0].shape)) == (
        "features",
        "FP32",
        [-1, 39],
    )
    tensor = triton.InferInput("features", list(features.shape), "FP32")
    tensor.set_data_from_numpy(features)
    got = client.infer("etr", [tensor], request_id="q1", headers=app)
    minutes = got.as_numpy("minutes")
    assert got.get_response().id == "q1"
    assert_minutes_of_v1_etr(minutes, serve_url, orders)
    # A malformed request and an unknown model are the client's errors, named.
    bad = triton.InferInput("features", [1, 38], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 38), np.float32))
    with pytest.raises(InferenceServerException, match="shape") as err:
        client.infer("etr", [bad], headers=app)
    assert err.value.status() == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException, match="no model 'other'"):
        client.is_model_ready("other", headers=app)
