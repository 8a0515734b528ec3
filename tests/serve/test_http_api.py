"""The Serve app over real HTTP and through its handle: answers equal the library's."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter

import httpx
import numpy as np
import pytest

from etr import features_from_orders, load_artifact, load_runtime, versions
from planner import dispatch_round, generate_round
from serve_app.schemas import DispatchRequest, OrderIn

from .conftest import LIMITS

pytestmark = pytest.mark.serve


def direct_plan(round_):
    """The same round through ``dispatch_round`` with the same ETR model, in this process."""
    rt = load_runtime(load_artifact("etr"), "onnxruntime")
    minutes = rt.predict(features_from_orders(round_.orders)) if round_.orders else None
    return dispatch_round(round_, backend="numpy", etr_minutes=minutes)


def body_of(round_) -> dict:
    return json.loads(DispatchRequest.from_domain(round_).model_dump_json())


def test_healthz_and_readyz(serve_url):
    """healthz: the process; readyz: both deployments loaded, warmed and healthy, and nothing
    of the configuration; /admin/status: the full state, for operators."""
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        assert c.get("/healthz").json() == {"status": "ok"}
        ready = c.get("/readyz")
        assert ready.status_code == 200, ready.text
        info = ready.json()
        assert info["ready"] is True
        assert set(info) == {"ready", "ingress", "or_solver", "etr"}
        assert info["ingress"] == {"round_reader": "loaded"}
        assert set(info["or_solver"]) == {"healthy", "kernel_warming", "kernel_stage"}
        assert set(info["etr"]) == {"healthy", "model_version", "loaded_versions"}
        status = c.get("/admin/status").json()
        assert status["etr"]["runtime"] == "onnxruntime"
        assert status["or_solver"]["backend"] == "numpy"
        assert {"admission", "cache"} <= set(status)


def test_the_cluster_s_public_ports_come_from_its_own_block(serve_endpoints):
    # Below the ephemeral range: a port the kernel called free there was once taken by an
    # outgoing connection before HAProxy bound it, and the whole session's Serve failed.
    from urllib.parse import urlsplit

    from ops.ports import CLUSTER_PORT_RANGE

    low, high = CLUSTER_PORT_RANGE
    ports = [
        urlsplit(serve_endpoints.http).port,
        int(serve_endpoints.grpc.rsplit(":", 1)[1]),
        urlsplit(serve_endpoints.metrics).port,
    ]
    assert all(low <= port < high for port in ports), ports


def test_openapi_docs_are_served(serve_url):
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        spec = c.get("/openapi.json").json()
        assert {"/v1/dispatch", "/v1/etr", "/healthz", "/readyz"} <= set(spec["paths"])
        assert c.get("/docs").status_code == 200


def test_dispatch_over_http_equals_dispatch_round(serve_url):
    round_ = generate_round(60, 25, seed=21)
    want = direct_plan(round_)
    with httpx.Client(base_url=serve_url, timeout=60) as c:
        r = c.post("/v1/dispatch", json=body_of(round_))
    assert r.status_code == 200, r.text
    got = r.json()
    assert {(a["order_id"], a["rider_id"]) for a in got["assignments"]} == {
        (a.order_id, a.rider_id) for a in want.assignments
    }
    assert got["cost"]["total"] == pytest.approx(want.cost.total, rel=1e-6)
    assert {k: [(s["order_id"], s["kind"]) for s in v] for k, v in got["routes"].items()} == {
        k: [(s.order_id, s.kind.value) for s in v.stops] for k, v in want.routes.items()
    }
    for oid, arrival in got["arrivals"].items():
        assert arrival["planned_s"] == pytest.approx(want.predicted_arrival[oid], abs=1e-3)
    # The test app leaves model_version unset: the newest version in the repository answers.
    assert got["model_version"] == versions("etr")[-1] and got["backend"] == "numpy"
    stages = got["timings_ms"]
    assert {"pack_ms", "etr_ms", "solve_ms", "unpack_ms", "total_ms"} <= set(stages)
    # The time the call held the solver's device is within the solve stage it was part of.
    assert 0 < stages["device_ms"] <= stages["solve_ms"]


def test_python_handle_api_equals_dispatch_round(serve_url):
    from ray import serve

    round_ = generate_round(40, 15, seed=5)
    plan = serve.get_app_handle("orml").plan.remote(round_).result(timeout_s=60)
    want = direct_plan(round_)
    assert plan.assignments == want.assignments
    assert plan.routes == want.routes
    assert plan.etr_arrival == pytest.approx(want.etr_arrival)


def test_etr_endpoint_equals_the_runtime(serve_url):
    round_ = generate_round(0, 12, seed=3)
    orders = [json.loads(OrderIn.from_domain(o).model_dump_json()) for o in round_.orders]
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        r = c.post("/v1/etr", json={"orders": orders, "utc_offset_s": 28800})
    assert r.status_code == 200, r.text
    want = load_runtime(load_artifact("etr"), "onnxruntime").predict(
        features_from_orders(round_.orders, utc_offset_s=28800)
    )
    np.testing.assert_allclose(r.json()["minutes"], want, atol=1e-4)


def test_a_burst_over_the_admission_budget_is_answered_200_or_shed_and_retries_succeed(
    serve_url,
):
    """120 rounds at once against a lane of 4 running + 8 queued: every answer is 200 or 503
    with Retry-After (no other status), shed answers come back at once, every admitted plan
    equals the library's; retrying the shed ones after Retry-After answers them all."""
    rounds = [generate_round(15, 4, seed=1000 + k) for k in range(120)]

    async def one(c: httpx.AsyncClient, round_) -> tuple[int, float, httpx.Response]:
        t0 = time.perf_counter()
        r = await c.post("/v1/dispatch", json=body_of(round_))
        return r.status_code, time.perf_counter() - t0, r

    async def fire(todo) -> list[tuple[int, float, httpx.Response]]:
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(base_url=serve_url, timeout=60, limits=limits) as c:
            return await asyncio.gather(*(one(c, r) for r in todo))

    answers = dict(zip(range(len(rounds)), asyncio.run(fire(rounds)), strict=True))
    statuses = Counter(status for status, _, _ in answers.values())
    assert set(statuses) <= {200, 503}, statuses
    assert statuses[503] > 0 and statuses[200] >= 4, statuses
    shed = [(lat, r) for status, lat, r in answers.values() if status == 503]
    assert all(int(r.headers["retry-after"]) >= 1 for _, r in shed)
    assert all("shed" in r.json()["detail"] for _, r in shed)
    assert max(lat for lat, _ in shed) < 5.0  # not queued into a timeout
    pending = [k for k, (status, _, _) in answers.items() if status != 200]
    for _attempt in range(30):
        if not pending:
            break
        time.sleep(max(int(answers[k][2].headers.get("retry-after", "1")) for k in pending))
        again = asyncio.run(fire([rounds[k] for k in pending]))
        answers.update(zip(pending, again, strict=True))
        assert {status for status, _, _ in again} <= {200, 503}
        pending = [k for k in pending if answers[k][0] != 200]
    assert not pending, f"{len(pending)} rounds never admitted"
    for k, round_ in enumerate(rounds):
        want = {(a.order_id, a.rider_id) for a in direct_plan(round_).assignments}
        got = answers[k][2].json()["assignments"]
        assert {(a["order_id"], a["rider_id"]) for a in got} == want


BASE = body_of(generate_round(4, 2, seed=9))


def mutate(path: list, value) -> dict:
    body = json.loads(json.dumps(BASE))
    node = body
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return body


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (mutate(["orders", 0, "promised_at"], KeyError), "promised_at"),
        (mutate(["orders", 0, "pickup", "lat"], "north"), "lat"),
        (mutate(["orders", 0, "pickup", "lat"], 123.0), "lat"),
        (mutate(["orders", 1, "created_at"], -5.0), "created_at"),
        (mutate(["riders", 0, "speed_mps"], 0), "speed_mps"),
        (mutate(["riders", 0, "surprise"], 1), "surprise"),
        (mutate(["weights", "max_orders_per_rider"], 0), "max_orders_per_rider"),
        (mutate(["now"], KeyError), "now"),
    ],
)
def test_bad_fields_are_422_naming_the_field(serve_url, body, field):
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        r = c.post("/v1/dispatch", json=body)
    assert r.status_code == 422, r.text
    assert field in json.dumps(r.json()["detail"])


def test_nan_and_infinity_are_422(serve_url):
    text = json.dumps(BASE).replace(str(BASE["now"]), "NaN", 1)
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        r = c.post("/v1/dispatch", content=text, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        inf = mutate(["orders", 0, "ready_at"], math.inf)
        r = c.post(
            "/v1/dispatch", content=json.dumps(inf), headers={"content-type": "application/json"}
        )
        assert r.status_code == 422 and "ready_at" in r.text


def test_promise_before_creation_and_broken_route_are_422(serve_url):
    order = BASE["orders"][0]
    early = mutate(["orders", 0, "promised_at"], order["created_at"] - 60)
    rider_with_route = next(k for k, r in enumerate(BASE["riders"]) if r["route"])
    broken = mutate(
        ["riders", rider_with_route, "route"], [BASE["riders"][rider_with_route]["route"][-1]]
    )
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        r = c.post("/v1/dispatch", json=early)
        assert r.status_code == 422 and "promised_at" in r.text
        r = c.post("/v1/dispatch", json=broken)
        assert r.status_code == 422, r.text
        assert r.json()["detail"][0]["loc"] == ["body", "riders", rider_with_route]


def test_oversize_requests_are_413_with_the_limit(serve_url):
    many = body_of(generate_round(LIMITS.max_riders + 1, 1, seed=2, route_stops=(0, 0)))
    with httpx.Client(base_url=serve_url, timeout=60) as c:
        r = c.post("/v1/dispatch", json=many)
        assert r.status_code == 413
        assert str(LIMITS.max_riders) in r.json()["detail"] and "riders" in r.json()["detail"]
        huge = b'{"now": 1, "riders": [], "orders": [], "pad": "' + b"x" * (3 << 20) + b'"}'
        r = c.post("/v1/dispatch", content=huge, headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert str(LIMITS.max_body_bytes) in r.json()["detail"]


def test_readyz_is_503_while_a_model_cannot_load(serve_url, grpc_address):
    """An app whose ETR version does not exist never becomes ready; /readyz says so. The app
    is deleted after, and the test waits until a gRPC call naming no application is routed
    again, as the tests that follow on this cluster make them."""
    from ray import serve
    from ray.serve.api import RunTarget, _run_many

    from serve_app.builder import build_app
    from serve_app.config import DispatchAppArgs

    args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", readiness_timeout_s=0.5)
    broken = build_app(args, {"Etr": {"user_config": {"model_version": "does-not-exist"}}})
    _run_many(
        [RunTarget(target=broken, name="broken", route_prefix="/broken")],
        wait_for_applications_running=False,
    )
    try:
        with httpx.Client(base_url=serve_url, timeout=30) as c:
            for _ in range(100):
                r = c.get("/broken/healthz")
                if r.status_code == 200:
                    break
                import time

                time.sleep(0.2)
            assert r.status_code == 200
            r = c.get("/broken/readyz")
            assert r.status_code == 503 and r.json()["ready"] is False
    finally:
        serve.delete("broken", _blocking=True)
        _wait_until_grpc_routes_unnamed_calls(grpc_address)


def _wait_until_grpc_routes_unnamed_calls(grpc_address: str, timeout_s: float = 30.0) -> None:
    """Wait until a gRPC call that names no application is routed again: while Serve's proxy
    (HAProxy's config, rewritten after the controller's) still has two apps, it answers
    such a call NOT_FOUND."""
    import time

    import grpc

    from serve_app.grpc_api.client import OrmlGrpcClient, OrmlGrpcError

    deadline = time.monotonic() + timeout_s
    with OrmlGrpcClient(grpc_address) as client:
        while True:
            try:
                client.etr(generate_round(0, 1, seed=0).orders)
                return
            except OrmlGrpcError as err:
                if err.code != grpc.StatusCode.NOT_FOUND or time.monotonic() > deadline:
                    raise
            time.sleep(0.2)
