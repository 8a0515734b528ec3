"""The ETR model on the Open Inference Protocol: the codec on its own (JSON and Triton's
binary tensors, every malformed input a 4xx naming it), then Triton's own HTTP client against
the session's app, answered with the minutes /v1/etr gives for the same orders."""

from __future__ import annotations

import json

import numpy as np
import pytest

from etr.features import N_FEATURES, features_from_orders
from planner import generate_round
from serve_app.error_answers import answer_for
from serve_app.kserve_v2 import encode_infer, parse_infer
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
    with pytest.raises(InvalidInput, match=match) as err:
        parse_infer(body, {}, 10)
    assert answer_for(err.value).http_status == 422


def test_rows_past_the_limit_are_too_large():
    with pytest.raises(TooLarge, match="rows: 2 exceeds the limit of 1"):
        parse_infer(request(ROWS.ravel().tolist()), {}, 1)


def test_tritons_http_client_gets_the_minutes_of_v1_etr(serve_url):
    import httpx
    import tritonclient.http as triton

    from serve_app.schemas import EtrRequest, OrderIn

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
    want = httpx.post(
        f"{serve_url}/v1/etr",
        content=EtrRequest(orders=[OrderIn.from_domain(o) for o in orders]).model_dump_json(),
        headers={"content-type": "application/json"},
        timeout=30,
    ).json()["minutes"]
    assert minutes.shape == (6,)
    assert minutes == pytest.approx(np.asarray(want, np.float32), abs=1e-3)
    # and a malformed request is the client's error, named
    bad = triton.InferInput("features", [1, 38], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 38), np.float32))
    with pytest.raises(Exception, match="shape"):
        client.infer("etr", [bad])
