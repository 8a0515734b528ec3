"""A plan's JSON answer, the same bytes as ``orjson.dumps(plan_to_dict(plan))``, from its columns.

``plan_to_dict`` builds a dict per assignment, stop and arrival (about 24,000 at 5000 x 2000:
7-8 ms) for orjson to walk. Here orjson encodes each column once, as one array (the order ids,
the costs, ...), a compiled pass finds each element's span (``_answer_json_jit.elements``)
and lays them out in the answer's shape (``_answer_json_jit.write``), and the small fields
(cost, unassigned, backend, versions, timings) are encoded by orjson as a dict whose text
follows. Every string and number is orjson's own text, so the answer is byte for byte the
dict's (``tests/serve/test_answer_json.py``).
"""

from __future__ import annotations

import numpy as np
import orjson

from domain import DispatchPlan, RouteTable
from serve_app.http import _answer_json_jit as jit
from serve_app.schemas import plan_summary


def _column(values: list) -> tuple[np.ndarray, np.ndarray]:
    """(orjson's array of ``values`` as bytes, int64[N, 2] each element's span in it)."""
    data = np.frombuffer(orjson.dumps(values), np.uint8)
    return data, jit.elements(data)


def dispatch_answer_json(plan: DispatchPlan) -> bytes:
    """``orjson.dumps(plan_to_dict(plan))``, without the dict."""
    assignments = plan.assignments
    riders, starts, stop_ids, pickup = RouteTable.of(plan.routes).columns()
    arriving = list(plan.predicted_arrival)
    etr = plan.etr_arrival
    one, two, three = jit.write(
        (
            *_column([a.order_id for a in assignments]),
            *_column([a.rider_id for a in assignments]),
            *_column([a.cost for a in assignments]),
        ),
        (
            *_column(riders),
            np.asarray(starts, np.int64).reshape(len(riders) + 1),
            *_column(stop_ids),
            np.array(pickup, np.bool_).reshape(len(stop_ids)),
        ),
        (
            *_column(arriving),
            *_column(list(plan.predicted_arrival.values())),
            *_column([etr.get(o) for o in arriving]),
        ),
    )
    rest = orjson.dumps(plan_summary(plan))
    return b"".join(
        (
            b'{"assignments":',
            one.tobytes(),
            b',"routes":',
            two.tobytes(),
            b',"arrivals":',
            three.tobytes(),
            b",",
            rest[1:],
        )
    )
