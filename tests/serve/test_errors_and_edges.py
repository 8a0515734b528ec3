"""The one error table, the request context from headers/metadata, the HTTP codecs and the
gRPC conversions: plain Python, no Ray."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import grpc
import msgpack
import pytest
from google.rpc import error_details_pb2, status_pb2
from starlette.requests import Request

from actors.errors import DeviceUnhealthy
from domain import TrafficClass
from planner import dispatch_round, generate_round
from serve_app.error_answers import ERROR_TABLE, answer_for, retry_after_header, retry_after_s
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api.convert import message_to_dict, rich_status
from serve_app.http import codec
from serve_app.pipeline import (
    DeadlineExceeded,
    InvalidInput,
    Overloaded,
    TooLarge,
    Unavailable,
    UnsupportedMediaType,
)
from serve_app.pipeline.context import context_from_metadata
from serve_app.schemas import DispatchRequest, DispatchResponse, plan_to_dict

C = grpc.StatusCode


@pytest.mark.parametrize(
    ("exc", "http", "code", "retry"),
    [
        (InvalidInput.at(("body", "now"), "bad"), 422, C.INVALID_ARGUMENT, None),
        (UnsupportedMediaType("text/plain", ["application/json"]), 415, C.INVALID_ARGUMENT, None),
        (TooLarge("riders", 9, 5), 413, C.RESOURCE_EXHAUSTED, None),
        (Overloaded("queue_full", 2.5), 503, C.RESOURCE_EXHAUSTED, 2.5),
        (DeadlineExceeded("late"), 504, C.DEADLINE_EXCEEDED, None),
        (Unavailable("down", 1.0), 503, C.UNAVAILABLE, 1.0),
        (DeviceUnhealthy("cuda:0", "poisoned"), 503, C.UNAVAILABLE, 1.0),
        (RuntimeError("bug"), 500, C.INTERNAL, None),
    ],
)
def test_every_error_has_one_http_status_and_one_grpc_code(exc, http, code, retry):
    answer = answer_for(exc)
    assert (answer.http_status, answer.grpc_code, retry_after_s(exc)) == (http, code, retry)


def test_the_table_is_looked_up_along_the_class_hierarchy():
    class Subclass(Overloaded):
        pass

    assert answer_for(Subclass("x", 1.0)) == ERROR_TABLE[Overloaded]


def test_retry_after_is_whole_seconds_at_least_one():
    assert [retry_after_header(s) for s in (0.01, 1.0, 1.2, 7.9)] == ["1", "1", "2", "8"]


def test_context_reads_the_timeout_priority_and_request_id():
    c = context_from_metadata(
        {"x-timeout-ms": "250", "x-priority": "OFFLINE", "x-request-id": "r1"},
        TrafficClass.ONLINE,
        10,
    )
    assert c.traffic_class is TrafficClass.OFFLINE and c.request_id == "r1"
    assert 0.2 < c.remaining_s() <= 0.25
    default = context_from_metadata({}, TrafficClass.ONLINE, 10)
    assert 9.9 < default.remaining_s() <= 10 and default.traffic_class is TrafficClass.ONLINE


@pytest.mark.parametrize("value", ["0", "-5", "abc", "nan", "1e12"])
def test_a_bad_timeout_header_is_422_naming_it(value):
    with pytest.raises(InvalidInput, match="x-timeout-ms"):
        context_from_metadata({"x-timeout-ms": value}, TrafficClass.ONLINE, 10)


def test_an_offline_caller_cannot_promote_itself_by_header():
    c = context_from_metadata({"x-priority": "online"}, TrafficClass.OFFLINE, 10)
    assert c.traffic_class is TrafficClass.OFFLINE


@pytest.mark.parametrize(
    ("presented", "promoted"), [(None, False), ("wrong", False), ("s3cret", True)]
)
def test_promotion_to_online_takes_the_configured_key(presented, promoted):
    headers = {"x-priority": "online"}
    if presented is not None:
        headers["x-priority-key"] = presented
    c = context_from_metadata(headers, TrafficClass.OFFLINE, 10, priority_key="s3cret")
    assert (c.traffic_class is TrafficClass.ONLINE) is promoted


def request(body: bytes, content_type: str | None, accept: str = "") -> Request:
    headers = [(b"accept", accept.encode())]
    if content_type is not None:
        headers.append((b"content-type", content_type.encode()))
    sent = False

    async def receive():
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return Request({"type": "http", "method": "POST", "headers": headers}, receive)


BODY = DispatchRequest.from_domain(generate_round(6, 3, seed=4))


@pytest.mark.parametrize(
    ("raw", "ctype"),
    [
        (BODY.model_dump_json().encode(), "application/json"),
        (BODY.model_dump_json().encode(), None),
        (BODY.model_dump_json().encode(), "application/json; charset=utf-8"),
        (msgpack.packb(BODY.model_dump(mode="json")), "application/x-msgpack"),
    ],
)
def test_json_and_msgpack_bodies_parse_to_the_same_request(raw, ctype):
    assert asyncio.run(codec.parse(request(raw, ctype), DispatchRequest)) == BODY


@pytest.mark.parametrize(
    "raw",
    [b"not json", b"\xff\xfe\x00", b"[" * 100_000 + b"]" * 100_000, b'{"now": true}', b""],
)
def test_bodies_that_are_not_the_schema_are_invalid_input_under_body(raw):
    with pytest.raises(InvalidInput) as err:
        asyncio.run(codec.parse(request(raw, "application/json"), DispatchRequest))
    assert err.value.errors[0].loc[0] == "body"


def test_bad_msgpack_is_invalid_input_and_other_media_types_are_415():
    with pytest.raises(InvalidInput, match="msgpack"):
        asyncio.run(codec.parse(request(b"\xc1", "application/x-msgpack"), DispatchRequest))
    with pytest.raises(UnsupportedMediaType, match="application/python-pickle"):
        asyncio.run(codec.parse(request(b"x", "application/python-pickle"), DispatchRequest))


def test_answers_are_encoded_as_asked():
    content = {"minutes": [1.5, 2.0], "model_version": "1"}
    as_json = codec.encode(request(b"", None), content)
    assert as_json.media_type == "application/json" and json.loads(as_json.body) == content
    as_msgpack = codec.encode(request(b"", None, accept="application/x-msgpack"), content)
    assert msgpack.unpackb(as_msgpack.body) == content


def test_the_fast_plan_dict_equals_the_response_model():
    plan = dispatch_round(generate_round(30, 12, seed=2), backend="numpy")
    fast = plan_to_dict(replace(plan, etr_model_version="1"))
    assert DispatchResponse.model_validate(fast).model_dump() == fast


def test_a_grpc_request_converts_to_the_same_validated_request():
    message = pb.DispatchRequest(**BODY.model_dump(exclude_none=True))
    assert DispatchRequest.model_validate(message_to_dict(message)) == BODY


def test_a_grpc_field_left_out_is_missing_not_zero():
    d = message_to_dict(pb.Position(lat=0.0))
    assert d == {"lat": 0.0}


def test_the_rich_status_carries_field_violations_and_retry_info():
    raw = rich_status(3, "bad", InvalidInput.at(("riders", 0, "speed_mps"), "too slow"), 2.0)
    status = status_pb2.Status.FromString(raw)
    bad, retry = error_details_pb2.BadRequest(), error_details_pb2.RetryInfo()
    assert status.details[0].Unpack(bad) and status.details[1].Unpack(retry)
    assert bad.field_violations[0].field == "riders.0.speed_mps"
    assert retry.retry_delay.ToMilliseconds() == 2000


# ---- the edge's bounds (hostile callers) -----------------------------------------------------
def test_metric_labels_are_route_templates_never_raw_paths():
    from serve_app.http.routes import UNMATCHED, route_label

    assert route_label({"path": "/v1/etr"}) == "/v1/etr"
    assert route_label({"path": "/api/v1/dispatch", "root_path": "/api"}) == "/v1/dispatch"
    labels = {route_label({"path": f"/wp-admin/{k}.php"}) for k in range(1000)}
    assert labels == {UNMATCHED}


@pytest.mark.parametrize(
    ("raw", "kept"),
    [("r-1:abc/DEF+=", True), ("x" * 129, False), ("a\nb", False), ("é", False), ("", False)],
)
def test_request_ids_are_kept_only_when_short_and_plain(raw, kept):
    from serve_app.pipeline.context import safe_request_id

    assert (safe_request_id(raw) == raw) is kept
    c = context_from_metadata({"x-request-id": raw}, TrafficClass.ONLINE, 10)
    assert (c.request_id == raw) is kept and len(c.request_id) <= 128


def test_an_answer_lists_twenty_field_errors_and_says_how_many_more():
    from pydantic import ValidationError, create_model

    from serve_app.http.codec import MAX_FIELD_ERRORS, invalid_input

    wide = create_model("Wide", **{f"f{k}": (int, ...) for k in range(500)})
    with pytest.raises(ValidationError) as exc:  # 500 missing fields
        wide.model_validate({})
    err = invalid_input(exc.value)
    assert len(err.errors) == MAX_FIELD_ERRORS + 1
    assert err.errors[-1].type == "too_many_errors" and "more errors" in err.errors[-1].msg
    long = InvalidInput.at(("body",), "x" * 10_000)
    assert len(long.errors[0].msg) <= 300


def test_each_endpoint_has_the_body_limit_its_lists_can_fill():
    from serve_app.config import Limits

    limits = Limits()
    assert limits.body_bytes("dispatch") == limits.max_body_bytes
    assert limits.body_bytes("etr") < limits.max_body_bytes / 3
    assert limits.body_bytes("solve") < 1 << 20
    assert limits.body_bytes("anything else") <= 64 * 1024


def test_grpc_lists_are_counted_before_anything_is_converted():
    from serve_app.config import Limits
    from serve_app.schemas import RequestModels

    models = RequestModels.for_limits(Limits(max_riders=3, max_route_stops=2))
    ok = pb.DispatchRequest(riders=[pb.Rider(route=[pb.Stop()] * 2)] * 3)
    RequestModels.check_lengths(ok, models.dispatch)
    with pytest.raises(TooLarge, match="riders: 4 exceeds the limit of 3"):
        RequestModels.check_lengths(pb.DispatchRequest(riders=[pb.Rider()] * 4), models.dispatch)
    with pytest.raises(TooLarge, match="route stops: 3 exceeds the limit of 2"):
        RequestModels.check_lengths(
            pb.DispatchRequest(riders=[pb.Rider(), pb.Rider(route=[pb.Stop()] * 3)]),
            models.dispatch,
        )


def test_a_plan_encodes_its_routes_from_columns_as_from_routes():
    plan = dispatch_round(generate_round(40, 15, seed=3), backend="numpy")
    as_dict = replace(plan, routes=dict(plan.routes.items()))
    assert plan_to_dict(plan) == plan_to_dict(as_dict)
