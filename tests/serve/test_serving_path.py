"""The serving path over real HTTP, gRPC and the handle: one pipeline, one solver hop, the
configured limits answered, deadlines honoured, errors mapped the same way in both protocols."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import grpc
import httpx
import msgpack
import numpy as np
import pytest

from etr import features_from_orders, load_artifact, load_runtime
from planner import dispatch_round, generate_round
from serve_app.config import DispatchAppArgs
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api import orml_pb2_grpc
from serve_app.grpc_api.client import OrmlGrpcClient, OrmlGrpcError
from serve_app.schemas import DispatchRequest, OrderIn

from .conftest import LIMITS
from .held_requests import HeldRequest, release_all

pytestmark = pytest.mark.serve
RUNTIME = load_runtime(load_artifact("etr"), "onnxruntime")
JSON = {"content-type": "application/json"}


def direct_plan(round_):
    minutes = RUNTIME.predict(features_from_orders(round_.orders)) if round_.orders else None
    return dispatch_round(round_, backend="numpy", etr_minutes=minutes)


def pairs(assignments) -> set[tuple[str, str]]:
    return {
        (a["order_id"], a["rider_id"]) if isinstance(a, dict) else (a.order_id, a.rider_id)
        for a in assignments
    }


def hops(app: str = "orml") -> dict[str, int]:
    from ray import serve

    return serve.get_app_handle(app).stats.remote().result(timeout_s=30)["hops"]


def test_http_grpc_and_the_handle_give_the_same_plan_with_one_solver_hop_each(
    serve_url, grpc_address
):
    """One hop per round: the solver's. The ETR model runs in the ingress (the session app's
    Etr replicas run on the CPU: ``etr_placement: auto``), once per round for its orders."""
    from ray import serve

    round_ = generate_round(50, 20, seed=31)
    want = pairs(direct_plan(round_).assignments)
    before = hops()
    r = httpx.post(
        f"{serve_url}/v1/dispatch",
        content=DispatchRequest.from_domain(round_).model_dump_json(),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    assert pairs(r.json()["assignments"]) == want
    after_http = hops()
    assert after_http["OrSolver.solve_round"] - before["OrSolver.solve_round"] == 1
    assert after_http["Etr in the ingress"] - before["Etr in the ingress"] == 1  # new orders
    assert after_http["Etr.predict"] == before["Etr.predict"]  # no ETR hop
    with OrmlGrpcClient(grpc_address) as client:
        got = client.dispatch(round_)
    assert pairs(got.assignments) == want
    plan = serve.get_app_handle("orml").plan.remote(round_).result(timeout_s=60)
    assert pairs(plan.assignments) == want
    after = hops()
    assert after["OrSolver.solve_round"] - after_http["OrSolver.solve_round"] == 2
    # computed again in the ingress (rows are not cached where the model runs), still no hop
    assert after["Etr in the ingress"] - after_http["Etr in the ingress"] == 2
    assert after["Etr.predict"] == before["Etr.predict"]


def test_msgpack_bodies_and_answers_equal_json(serve_url):
    body = json.loads(DispatchRequest.from_domain(generate_round(20, 8, seed=33)).model_dump_json())
    with httpx.Client(base_url=serve_url, timeout=60) as c:
        as_json = c.post("/v1/dispatch", json=body).json()
        as_msgpack = c.post(
            "/v1/dispatch",
            content=msgpack.packb(body),
            headers={"content-type": "application/x-msgpack", "accept": "application/x-msgpack"},
        )
    assert as_msgpack.headers["content-type"] == "application/x-msgpack"
    got = msgpack.unpackb(as_msgpack.content)
    assert got["assignments"] == as_json["assignments"] and got["routes"] == as_json["routes"]


def test_an_unsupported_content_type_is_415_naming_the_accepted_ones(serve_url):
    form = {"content-type": "application/x-www-form-urlencoded"}
    r = httpx.post(f"{serve_url}/v1/etr", content=b"orders=1", headers=form, timeout=30)
    assert r.status_code == 415 and "application/json" in r.json()["detail"]


def test_etr_and_dispatch_over_the_batch_size_are_split_not_refused(serve_url):
    orders = generate_round(0, LIMITS.max_orders, seed=977).orders  # > 256, the batch size
    body = {"orders": [json.loads(OrderIn.from_domain(o).model_dump_json()) for o in orders]}
    round_ = generate_round(40, LIMITS.max_orders, seed=978)
    with httpx.Client(base_url=serve_url, timeout=120) as c:
        r = c.post("/v1/etr", json=body)
        assert r.status_code == 200, r.text
        np.testing.assert_allclose(
            r.json()["minutes"], RUNTIME.predict(features_from_orders(orders)), atol=1e-4
        )
        d = c.post(
            "/v1/dispatch", json=json.loads(DispatchRequest.from_domain(round_).model_dump_json())
        )
    assert d.status_code == 200, d.text
    assert pairs(d.json()["assignments"]) == pairs(direct_plan(round_).assignments)


def dispatch_lane(app: str = "orml") -> dict:
    from ray import serve

    return serve.get_app_handle(app).stats.remote().result(timeout_s=30)["admission"]["dispatch"]


def test_requests_whose_deadline_passes_while_queued_are_dropped_not_computed(serve_url):
    """Four requests hold the dispatch lane (their bodies stop halfway); requests with a 100 ms
    deadline behind them are answered 503 (deadline) without ever reaching the solver."""
    body = DispatchRequest.from_domain(generate_round(5, 2, seed=41)).model_dump_json().encode()
    before = hops()["OrSolver.solve_round"]
    held = [
        HeldRequest(serve_url, "/v1/dispatch", body, {"x-timeout-ms": "60000"}) for _ in range(4)
    ]
    try:
        deadline = time.monotonic() + 30
        while dispatch_lane()["in_flight"] < 4:  # all four admitted, waiting for their bodies
            assert time.monotonic() < deadline, dispatch_lane()
            time.sleep(0.05)

        async def late_ones():
            async with httpx.AsyncClient(base_url=serve_url, timeout=60) as c:
                headers = {"content-type": "application/json", "x-timeout-ms": "100"}
                return await asyncio.gather(
                    *(c.post("/v1/dispatch", content=body, headers=headers) for _ in range(3))
                )

        t0 = time.perf_counter()
        late = asyncio.run(late_ones())
        late_s = time.perf_counter() - t0
    finally:
        answers = release_all(held)
    assert [r.status_code for r in late] == [503, 503, 503], [r.text for r in late]
    assert all("deadline" in r.json()["detail"] and "retry-after" in r.headers for r in late)
    assert late_s < 5.0
    assert [status for status, _ in answers] == [200] * 4, answers
    assert hops()["OrSolver.solve_round"] - before == 4


def test_grpc_bad_input_is_invalid_argument_naming_the_field(grpc_address):
    req = DispatchRequest.from_domain(generate_round(4, 2, seed=9))
    message = pb.DispatchRequest(**req.model_dump(exclude_none=True))
    message.riders[0].speed_mps = 0.0
    message.ClearField("now")
    stub = orml_pb2_grpc.OrmlStub(grpc.insecure_channel(grpc_address))
    with pytest.raises(grpc.RpcError) as err:
        stub.Dispatch(message, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with OrmlGrpcClient(grpc_address) as client, pytest.raises(OrmlGrpcError) as typed:
        client._call(client._stub.Dispatch, message)
    assert {"now", "riders.0.speed_mps"} <= set(typed.value.fields)


def test_grpc_oversize_is_resource_exhausted_naming_the_limit(grpc_address):
    round_ = generate_round(LIMITS.max_riders + 1, 1, seed=2, route_stops=(0, 0))
    with OrmlGrpcClient(grpc_address) as client, pytest.raises(OrmlGrpcError) as err:
        client.dispatch(round_)
    assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "riders" in err.value.details and str(LIMITS.max_riders) in err.value.details
    assert err.value.retry_after_s is None


def test_grpc_shed_requests_are_resource_exhausted_with_retry_info(serve_url, grpc_address):
    """The dispatch lane full (HTTP requests hold its running and queued places): a gRPC round
    is RESOURCE_EXHAUSTED with a RetryInfo; the held ones are all answered once they finish."""
    lane = dispatch_lane()
    room = lane["max_in_flight"] + lane["max_queued"]
    body = DispatchRequest.from_domain(generate_round(5, 2, seed=42)).model_dump_json().encode()
    held = []
    try:
        for _ in range(room):
            held.append(HeldRequest(serve_url, "/v1/dispatch", body, {"x-timeout-ms": "60000"}))
        deadline = time.monotonic() + 30
        while (lane := dispatch_lane())["in_flight"] + lane["queued"] < room:
            assert time.monotonic() < deadline, lane
            time.sleep(0.05)
        with OrmlGrpcClient(grpc_address) as client, pytest.raises(OrmlGrpcError) as shed:
            client.dispatch(generate_round(60, 30, seed=500))
    finally:
        answers = release_all(held)
    assert shed.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, shed.value.details
    assert shed.value.retry_after_s is not None and shed.value.retry_after_s >= 1
    assert [status for status, _ in answers] == [200] * room, [a[-120:] for _, a in answers]


READINESS_SEEN: list[tuple[int, dict]] = []


@pytest.fixture(scope="module")
def limits_app(serve_url) -> Iterator[str]:
    """An app with the configured (default) limits beside the session's small-limit one;
    its /readyz answers from deployment until ready are kept in READINESS_SEEN."""
    from ray import serve

    from ops import local

    args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime")
    small = {"ray_actor_options": {"num_cpus": 0.1}}
    options = {d: small for d in ("Ingress", "OrSolver", "Etr")}
    local.run_app(args, options, name="limits", route_prefix="/limits")
    url = f"{serve_url}/limits"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        r = httpx.get(f"{url}/readyz", timeout=30)
        READINESS_SEEN.append((r.status_code, r.json()))
        if r.status_code == 200:
            break
        time.sleep(0.05)
    try:
        yield url
    finally:
        serve.delete("limits", _blocking=True)


def test_ready_means_warm(limits_app):
    """/readyz is 200 only once the solver's compiled kernel and the ingress's round reader
    are loaded (a warming replica answered the first dispatches 5-10x slower); a 503 with
    both deployments healthy names which of the two is still loading."""
    assert READINESS_SEEN and READINESS_SEEN[-1][0] == 200
    for status, body in READINESS_SEEN:
        solver = body.get("or_solver")
        if status == 200:
            assert solver["healthy"] and not solver["kernel_warming"]
            assert body["ingress"]["round_reader"] == "loaded"
        elif solver is not None and solver["healthy"] and body["etr"]["healthy"]:
            assert solver["kernel_warming"] or body["ingress"]["round_reader"] == "loading", body


def test_a_round_at_the_configured_limits_is_answered_over_http_and_grpc(limits_app, grpc_address):
    """5000 riders x 2000 orders (the default limits): the round's arrays exceed gRPC's 4 MiB
    message cap between replicas in throughput mode, and 2000 ETR rows exceed a batch."""
    limits = DispatchAppArgs().limits
    round_ = generate_round(limits.max_riders, limits.max_orders, seed=77)
    body = DispatchRequest.from_domain(round_).model_dump_json()
    r = httpx.post(f"{limits_app}/v1/dispatch", content=body, headers=JSON, timeout=300)
    assert r.status_code == 200, r.text[:500]
    got = r.json()
    assert len(got["assignments"]) + len(got["unassigned"]) == limits.max_orders
    with OrmlGrpcClient(grpc_address, timeout_s=300, application="limits") as client:
        via_grpc = client.dispatch(round_)
    assert pairs(via_grpc.assignments) == pairs(got["assignments"])


def test_the_readme_example_size_is_answered(limits_app):
    body = DispatchRequest.from_domain(generate_round(1000, 300, seed=0)).model_dump_json()
    r = httpx.post(f"{limits_app}/v1/dispatch", content=body, headers=JSON, timeout=300)
    assert r.status_code == 200, r.text[:500]
