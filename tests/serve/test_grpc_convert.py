"""The gRPC answer of a plan (``serve_app.grpc_api.answer_message.dispatch_answer``, written from
the plan's columns) carries every field of the plan's dict (``plan_to_dict``, the one
plan-to-wire mapping), and is the message the fallback fills from that dict
(``convert.dispatch_response``, while the writer loads), as a unit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from domain import Route, Stop, StopKind
from planner import dispatch_round, generate_round
from serve_app.grpc_api import convert
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api.answer_message import SerializedAnswer, dispatch_answer
from serve_app.schemas import plan_to_dict


def _holds(plan) -> None:
    """The answer parses to a message holding ``plan_to_dict(plan)`` field by field."""
    d = plan_to_dict(plan)
    answer = dispatch_answer(plan)
    assert isinstance(answer, SerializedAnswer) and answer.SerializeToString() == bytes(answer)
    m = pb.DispatchResponse.FromString(answer)
    assert [(a.order_id, a.rider_id, a.cost) for a in m.assignments] == [
        (a["order_id"], a["rider_id"], a["cost"]) for a in d["assignments"]
    ]
    assert {r: [(s.order_id, s.kind) for s in stops.stops] for r, stops in m.routes.items()} == {
        r: [(s["order_id"], s["kind"]) for s in stops] for r, stops in d["routes"].items()
    }
    assert {
        o: (a.planned_s, a.etr_s if a.HasField("etr_s") else None) for o, a in m.arrivals.items()
    } == {o: (a["planned_s"], a["etr_s"]) for o, a in d["arrivals"].items()}
    assert [(u.order_id, u.reason) for u in m.unassigned] == [
        (u["order_id"], u["reason"]) for u in d["unassigned"]
    ]
    assert (m.cost.travel_s, m.cost.lateness_s, m.cost.total) == tuple(d["cost"].values())
    assert (m.backend, m.solved_by, m.model_version) == (
        d["backend"],
        d["solved_by"],
        d["model_version"] or "",
    )
    assert dict(m.timings_ms) == d["timings_ms"]
    assert m == convert.dispatch_response(d)


def test_the_answer_message_holds_the_plan_field_by_field():
    round_ = generate_round(6, 20, seed=3)
    plan = dispatch_round(round_, etr_minutes=np.full(20, 35.0))
    d = plan_to_dict(plan)
    assert d["unassigned"] and d["assignments"] and d["routes"]
    assert any(a["etr_s"] is not None for a in d["arrivals"].values())
    _holds(plan)


@pytest.mark.parametrize(("riders", "orders", "seed"), [(0, 3, 1), (1, 0, 2), (40, 15, 3)])
def test_plans_of_every_shape_are_answered_whole(riders, orders, seed):
    _holds(dispatch_round(generate_round(riders, orders, seed=seed)))


def test_ids_past_ascii_long_ids_and_routes_given_as_objects_are_written_as_protobuf_would():
    plan = dispatch_round(generate_round(5, 4, seed=6), etr_minutes=np.full(4, 20.0))
    long = "x" * 300  # a length past one varint byte
    routes = {
        "rïder-é": Route((Stop("order-ü", StopKind.PICKUP), Stop("order-ü", StopKind.DROPOFF))),
        long: Route(),
        "r2": Route((Stop(long, StopKind.DROPOFF),)),
    }
    _holds(
        replace(
            plan,
            routes=routes,
            predicted_arrival={"order-ü": 1.5, long: -0.0, "😀": 1e300},
            etr_arrival={"😀": 2.0},
            solved_by="replica-ß",
            etr_model_version=None,
        )
    )
