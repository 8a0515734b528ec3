"""The gRPC answer of a plan (``serve_app.grpc_api.convert.dispatch_response``) carries every
field of the plan's dict (``plan_to_dict``, the one plan-to-wire mapping), as a unit."""

from __future__ import annotations

import numpy as np

from planner import dispatch_round, generate_round
from serve_app.grpc_api import convert
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.schemas import plan_to_dict


def test_the_answer_message_holds_the_plan_field_by_field():
    round_ = generate_round(6, 20, seed=3)
    d = plan_to_dict(dispatch_round(round_, etr_minutes=np.full(20, 35.0)))
    assert d["unassigned"] and d["assignments"] and d["routes"]
    assert any(a["etr_s"] is not None for a in d["arrivals"].values())
    m = pb.DispatchResponse.FromString(convert.dispatch_response(d).SerializeToString())
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
