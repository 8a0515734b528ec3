"""A plan's JSON answer written from its columns (``serve_app.http.answer_json``) is byte for byte
``orjson.dumps(plan_to_dict(plan))``, the answer it replaces (the one plan-to-wire mapping)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from domain import Route, Stop, StopKind
from planner import dispatch_round, generate_round
from serve_app.http.answer_json import dispatch_answer_json
from serve_app.schemas import plan_to_dict


def _same(plan) -> None:
    want = orjson.dumps(plan_to_dict(plan), option=orjson.OPT_SERIALIZE_NUMPY)
    assert dispatch_answer_json(plan) == want


@pytest.mark.parametrize(
    ("riders", "orders", "seed", "etr"),
    [(6, 20, 3, True), (0, 3, 1, False), (1, 0, 2, False), (40, 15, 4, True), (300, 100, 5, False)],
)
def test_plans_of_every_shape_are_written_as_their_dict(riders, orders, seed, etr):
    minutes = np.full(orders, 35.0) if etr and orders else None
    _same(dispatch_round(generate_round(riders, orders, seed=seed), etr_minutes=minutes))


_ODD = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    riders=st.lists(_ODD, unique=True, max_size=4),
    stops=st.lists(_ODD, max_size=6),
    arrivals=st.dictionaries(_ODD, st.floats(), max_size=5),
    etr=st.lists(st.one_of(st.none(), st.floats()), max_size=5),
)
def test_any_ids_and_numbers_are_written_as_orjson_writes_them(riders, stops, arrivals, etr):
    """Quotes, backslashes, commas, control characters and any Unicode in the ids; NaN,
    infinities, -0.0 and huge numbers in the times (orjson writes the non-finite as null)."""
    plan = dispatch_round(generate_round(3, 2, seed=7), etr_minutes=np.full(2, 20.0))
    kinds = (StopKind.PICKUP, StopKind.DROPOFF)
    routes = {
        r: Route(tuple(Stop(s, kinds[(k + j) % 2]) for j, s in enumerate(stops[k:])))
        for k, r in enumerate(riders)
    }
    odd = replace(
        plan,
        routes=routes,
        predicted_arrival=arrivals,
        etr_arrival={o: t for o, t in zip(arrivals, etr, strict=False) if t is not None},
        solved_by='replica,"1"',
    )
    _same(odd)
