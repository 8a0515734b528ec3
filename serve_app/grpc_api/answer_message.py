"""A plan's gRPC answer (``orml.v1.DispatchResponse``) serialized from its columns.

Built the usual way, a 5000 x 2000 plan's answer (2,000 assignments, ~13,000 stops in ~5,000
routes, ~7,000 arrivals) went through ``plan_to_dict`` and then a message filled field by field:
about 18 ms of Python per answer, where serializing the filled message took under one. Here
the three big fields (assignments, routes, arrivals) are written by one compiled pass
(``_answer_message_jit.write``) from the plan's columns, every id a span of one UTF-8 buffer,
and the small ones (cost, unassigned, backend, versions, timings) by protobuf itself; the two
parts hold different fields, so their concatenation is the whole message (protobuf merges
concatenated messages). Serve's replica serializes what a gRPC method returns by calling its
``SerializeToString``: ``SerializedAnswer`` is bytes that answer that call with themselves.
``tests/serve/test_grpc_convert.py`` holds the message to the plan's dict (``plan_to_dict``),
field by field.
"""

from __future__ import annotations

import numpy as np

from domain import DispatchPlan, RouteTable
from serve_app.grpc_api import _answer_message_jit as jit
from serve_app.grpc_api import convert
from serve_app.schemas import plan_summary


class SerializedAnswer(bytes):
    """A message already serialized (what Serve sends for a gRPC method's answer)."""

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        return bytes(self)


def _utf8(ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the ids' UTF-8 bytes end to end, int64[N + 1] offsets of each). Raises
    UnicodeEncodeError for a string protobuf could not send either (a lone surrogate)."""
    text = "".join(ids)
    data = text.encode()
    if len(data) == len(text):  # ASCII: one byte a character
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
    else:
        encoded = [i.encode() for i in ids]
        data = b"".join(encoded)
        lengths = np.fromiter(map(len, encoded), np.int64, len(ids))
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.frombuffer(data, np.uint8), offsets


def dispatch_answer(plan: DispatchPlan) -> SerializedAnswer:
    """``plan`` as a serialized ``DispatchResponse``: the same message as filling one from
    ``plan_to_dict(plan)``. Raises UnicodeEncodeError for an id protobuf cannot send."""
    assignments = plan.assignments
    order_ids = [a.order_id for a in assignments]
    rider_ids = [a.rider_id for a in assignments]
    cost = np.array([a.cost for a in assignments], np.float64).reshape(len(assignments))
    riders, starts, stop_ids, pickup = RouteTable.of(plan.routes).columns()
    arriving = list(plan.predicted_arrival)
    etr = plan.etr_arrival
    etr_s = [etr.get(o) for o in arriving]
    big = jit.write(
        (*_utf8(order_ids), *_utf8(rider_ids), cost),
        (
            *_utf8(riders),
            np.asarray(starts, np.int64).reshape(len(riders) + 1),
            *_utf8(stop_ids),
            np.array(pickup, np.bool_).reshape(len(stop_ids)),
        ),
        (
            *_utf8(arriving),
            np.fromiter(plan.predicted_arrival.values(), np.float64, len(arriving)),
            np.array([0.0 if t is None else t for t in etr_s], np.float64).reshape(len(arriving)),
            np.array([t is not None for t in etr_s], np.bool_).reshape(len(arriving)),
        ),
    )
    small = convert.summary_response(plan_summary(plan))
    return SerializedAnswer(small.SerializeToString() + big.tobytes())
