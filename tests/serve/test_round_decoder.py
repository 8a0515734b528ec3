"""The dispatch fast path never accepts what the models refuse, nor reads a body differently.

``serve_app.round_decoder`` takes a JSON or msgpack round straight to the packer's columns and
returns None for anything it does not take whole (the pydantic models then give the answer).
So for every body: if it decodes, the models accept it too, with the same new orders and
weights, and the round packs to the same arrays."""

from __future__ import annotations

import copy
import json

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner import generate_round
from serve_app.config import Limits
from serve_app.http import codec
from serve_app.pipeline.errors import InvalidInput, TooLarge
from serve_app.round_decoder import RoundDecoder
from serve_app.schemas import DispatchRequest, RequestModels

LIMITS = Limits(max_riders=40, max_orders=20, max_route_stops=24)
MODELS = RequestModels.for_limits(LIMITS)
DECODER = RoundDecoder.for_limits(LIMITS)


def reading(source) -> tuple:
    """What a ``RoundSource`` says of its round, comparable with ``==``: the new orders,
    the weights, the UTC offset, and every packed array (as bytes: NaN equals NaN)."""
    packed = source.packed()
    arrays = [
        (name, a.dtype.str, a.shape, a.tobytes())
        for batch in (packed.routes, packed.orders)
        for name, a in vars(batch).items()
        if isinstance(a, np.ndarray)
    ]
    arrays.append(("owner", packed.owner.dtype.str, packed.owner.shape, packed.owner.tobytes()))
    return (
        source.new_orders().to_orders(),
        source.dispatch_weights(),
        source.utc_offset_s,
        packed.now,
        packed.rider_ids,
        packed.order_ids,
        arrays,
    )


def fast_round(body: bytes, media: str = codec.JSON, compiled: bool = True):
    """The fast path's reading of ``body`` (``reading``), or None when it refuses it (at the
    decode, or as the model's ``InvalidInput`` when the round is packed). compiled: JSON
    through the compiled reader first (then the Structs), else the Structs alone."""
    got = DECODER.decode(body, media, compiled)
    if got is None:
        return None
    try:
        return reading(got)
    except InvalidInput:
        return None


def model_round(body: bytes, media: str = codec.JSON):
    """The models' reading of ``body`` (``reading``), or None when they refuse it."""
    try:
        req = codec.validate_body(body, media, MODELS.dispatch)
        req.to_domain()
        return reading(req.to_source())
    except (ValidationError, InvalidInput):
        return None


def base_body(riders: int, orders: int, seed: int) -> dict:
    return json.loads(
        DispatchRequest.from_domain(generate_round(riders, orders, seed=seed)).model_dump_json()
    )


@pytest.mark.parametrize(
    ("riders", "orders", "seed"), [(1, 1, 0), (12, 5, 1), (40, 20, 2), (0, 3, 3)]
)
def test_valid_rounds_decode_to_the_models_round(riders, orders, seed):
    body = base_body(riders, orders, seed)
    body["weights"] = {"late_weight": 2, "max_orders_per_rider": 2, "candidate_riders": 5}
    body["utc_offset_s"] = 3600
    for raw, media in (
        (json.dumps(body).encode(), codec.JSON),
        (msgpack.packb(body), codec.MSGPACK),
    ):
        for compiled in (True, False):
            got = DECODER.decode(raw, media, compiled)
            assert got is not None
            assert reading(got) == model_round(raw, media)


def test_bodies_past_a_limit_are_the_models_413_and_malformed_ones_left_to_the_models():
    over = base_body(41, 1, 0)
    for raw, media in (
        (json.dumps(over).encode(), codec.JSON),
        (msgpack.packb(over), codec.MSGPACK),
    ):
        with pytest.raises(TooLarge) as reader:
            DECODER.decode(raw, media)
        with pytest.raises(TooLarge) as model:
            codec.validate_body(raw, media, MODELS.dispatch)
        assert str(reader.value) == str(model.value) == "riders: 41 exceeds the limit of 40"
        assert DECODER.decode(raw, media, compiled=False) is None
    for raw in (
        b'{"now": 1, "riders": [], "orders": [], "extra": 1}',
        b'{"now": NaN, "riders": [], "orders": []}',
        b'{"now": 1, "riders": [], "orders": [],}',
        b"\xef\xbb\xbf{}",
    ):
        assert DECODER.decode(raw) is None
        assert DECODER.decode(raw, compiled=False) is None
    assert DECODER.decode(b'{"now": 1, "riders": [], "orders": []}') is not None
    # msgpack the same: an unknown field, a non-finite now, binary where a number goes,
    # truncated, not msgpack at all
    empty = {"now": 1, "riders": [], "orders": []}
    for raw in (
        msgpack.packb({**empty, "extra": 1}),
        msgpack.packb({**empty, "now": float("nan")}),
        msgpack.packb({**empty, "now": b"\x00"}),
        msgpack.packb(base_body(3, 2, 1))[:-3],
        b"\xc1",
    ):
        assert fast_round(raw, codec.MSGPACK) is None, raw[:60]
    assert DECODER.decode(msgpack.packb(empty), codec.MSGPACK) is not None


HOSTILE = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            1,
            1.5,
            2.0,
            1e10,
            1e11,
            -1e-9,
            10**20,
            90,
            91,
            -180.5,
            1001,
            10_001,
            50.1,
            0.05,
            "",
            "x",
            "a" * 129,
            "pickup",
            "dropoff",
            "PICKUP",
            [],
            {},
            [1],
            {"lat": 1, "lng": 2},
        ]
    ),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(),
    st.text(max_size=5),
)


#: What a msgpack body can hold that a JSON one cannot: non-finite floats, binary and extension
#: data, integers past JSON's safe range, strings past the msgpack reader's bound, non-string
#: map keys.
MSGPACK_ONLY = st.sampled_from(
    [
        float("nan"),
        float("inf"),
        -float("inf"),
        b"abc",
        msgpack.ExtType(1, b"x"),
        2**63,
        -(2**63),
        "a" * 5000,
        {1: 2},
    ]
)


def _paths(obj, here=()):
    """Every (container, key) in ``obj``."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield obj, k
            yield from _paths(v, (*here, k))
    elif isinstance(obj, list):
        for k, v in enumerate(obj):
            yield obj, k
            yield from _paths(v, (*here, k))


def _edited(
    seed: int, edits: list[tuple[int, str, object]], riders: int = 6, orders: int = 4
) -> dict:
    """A valid round's body (``riders`` x ``orders``) with ``edits`` made: (which place, its
    kind, the value)."""
    return edited(base_body(riders, orders, seed), edits)


def edited(body: dict, edits: list[tuple[int, str, object]]) -> dict:
    """``body`` with ``edits`` made in place: (which place, its kind, the value)."""
    for pick, how, shared in edits:
        # sampled_from hands out the same list and dict objects every time: a copy, so that
        # no example mutates them for the next and the body never holds itself (a cycle).
        value = copy.deepcopy(shared)
        places = list(_paths(body))
        container, key = places[pick % len(places)]
        if how == "set":
            container[key] = value
        elif how == "delete":
            del container[key]
        elif isinstance(container, dict):
            container["unknown_field"] = value
        else:
            container.append(value)
    return body


#: One to three hostile edits: (which place, its kind, the value), drawn apart.
EDITS = st.lists(
    st.tuples(st.integers(0, 10**6), st.sampled_from(["set", "delete", "add"]), HOSTILE),
    min_size=1,
    max_size=3,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), edits=EDITS)
def test_the_fast_path_takes_a_body_when_the_model_does_and_reads_it_the_same(seed, edits):
    raw = json.dumps(_edited(seed, edits), allow_nan=False).encode()
    # The same rules, generated from the model: it takes a body exactly when the model does,
    # and reads it the same; the compiled reader in front of the Structs changes nothing.
    want = model_round(raw)
    assert fast_round(raw, compiled=False) == want, raw[:300]
    assert fast_round(raw) == want, raw[:300]


#: As ``EDITS``, with the values only msgpack carries among them.
MSGPACK_EDITS = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.sampled_from(["set", "delete", "add"]),
        st.one_of(HOSTILE, MSGPACK_ONLY),
    ),
    min_size=1,
    max_size=3,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), edits=MSGPACK_EDITS)
def test_a_msgpack_body_is_taken_when_the_model_takes_it_and_read_the_same(seed, edits):
    """As above, for msgpack bodies, with the values only msgpack can carry among the edits;
    the kind of each edit and its place are drawn apart."""
    try:
        raw = msgpack.packb(_edited(seed, edits))
    except (OverflowError, TypeError, ValueError):  # an integer past 64 bits
        return
    want = model_round(raw, codec.MSGPACK)
    assert fast_round(raw, codec.MSGPACK, compiled=False) == want, raw[:300]
    assert fast_round(raw, codec.MSGPACK) == want, raw[:300]


def test_riders_breaking_a_domain_rule_are_answered_by_the_model():
    """The wire takes the body (every field in its bounds); packing finds the stop for an
    order the rider does not carry and answers with the model's 422 naming the rider."""
    body = base_body(3, 1, 5)
    rider = next(r for r in body["riders"] if r["route"])
    rider["route"][0]["order_id"] = "nobody-carries-this"
    raw = json.dumps(body).encode()
    got = DECODER.decode(raw)
    assert got is not None
    with pytest.raises(InvalidInput, match="unknown order") as caught:
        got.packed()
    assert caught.value.errors[0].loc[:2] == ("body", "riders")


def test_times_the_kernels_cannot_hold_are_a_422_naming_the_field_on_both_paths():
    """now = 0 with every time near 1e10: the fast path packs nothing and both answer
    InvalidInput naming the order and field (it was planned, its costs disagreeing)."""
    body = base_body(2, 1, 4)
    body["now"] = 0.0
    raw = json.dumps(body).encode()
    got = RoundDecoder(LIMITS).decode(raw)
    for read in (got.packed, DispatchRequest.model_validate_json(raw).to_domain):
        with pytest.raises(InvalidInput, match="from the round's now"):
            read()


#: The JSON Schema keywords that state a rule a body must keep.
_RULES = frozenset(
    {"minimum", "maximum", "maxItems", "minLength", "maxLength", "required", "additionalProperties"}
)


def _rules(schema: dict) -> dict[tuple, set]:
    """Every rule of ``schema`` by the field path it applies to (``[]`` for list items)."""
    defs, out, seen = schema.get("$defs", {}), {}, set()

    def walk(node: dict, path: tuple) -> None:
        if "$ref" in node:
            name = node["$ref"].split("/")[-1]
            if (name, path) not in seen:
                seen.add((name, path))
                walk(defs[name], path)
            return
        for key, value in node.items():
            if key in _RULES and value not in ([], None):
                out.setdefault(path, set()).add((key, json.dumps(value, sort_keys=True)))
            elif key == "properties":
                for name, sub in value.items():
                    walk(sub, (*path, name))
            elif key == "items":
                walk(value, (*path, "[]"))
            elif key == "anyOf":
                for sub in value:
                    walk(sub, path)

    walk(schema, ())
    return out


def test_the_fast_paths_structs_carry_every_rule_of_the_bounded_model():
    import msgspec

    from serve_app.round_decoder import model_struct

    model = MODELS.dispatch
    assert _rules(msgspec.json.schema(model_struct(model))) == _rules(model.model_json_schema())
    assert ("riders",) in _rules(model.model_json_schema())  # the limits are among them


@pytest.mark.parametrize(("riders", "orders", "seed"), [(0, 2, 1), (12, 5, 2), (40, 20, 3)])
def test_a_rounds_fields_are_its_requests_json_as_the_models_write_it(riders, orders, seed):
    """The clients send a domain round as ``round_fields`` (no model built of it): the same
    JSON the model writes for it, so the server reads the same round."""
    from serve_app.schemas import round_fields

    round_ = generate_round(riders, orders, seed=seed)
    fields = json.loads(json.dumps(round_fields(round_, 1800.0)))
    model = DispatchRequest.from_domain(round_, 1800.0)
    assert fields == model.model_dump(mode="json", exclude_none=True)
