"""The compiled round readers of JSON and msgpack bodies never accept what the models refuse,
nor read a body differently, however the body is spelled.

``serve_app.http.round_body`` walks a JSON or msgpack body straight into the columns the gRPC
reader fills and returns None for anything it does not take whole (the wire Structs, then the
models, answer it). So, for every body: if the reader takes it, the models accept it too and
read the same round (the same new orders, weights and packed arrays); and a valid round,
spelled any way the format allows (whitespace, key order, number forms, ``null`` where a field
is optional; msgpack's integer widths and single floats), is taken."""

from __future__ import annotations

import json
import math
import random

import msgpack
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from planner import generate_round
from planner.rider_columns import rider_columns
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api.round_message import read_round
from serve_app.http import codec
from serve_app.http.round_body import read_body_round
from serve_app.pipeline.errors import InvalidInput, TooLarge
from serve_app.round_columns import ColumnRound
from serve_app.round_decoder import _column_source
from serve_app.schemas import DispatchRequest, round_fields

from .test_round_decoder import (
    DECODER,
    EDITS,
    LIMITS,
    MODELS,
    MSGPACK_EDITS,
    _edited,
    base_body,
    edited,
    model_round,
    reading,
)


def read_json(raw: bytes, model, limits):
    return read_body_round(raw, codec.JSON, model, limits)


def reader_round(raw: bytes, media: str = codec.JSON):
    """The compiled reader's reading of ``raw`` alone (no fallback), or None where it leaves
    the body to the slower readers (at the read, or as the model's ``InvalidInput`` when the
    round is packed)."""
    got = read_body_round(raw, media, MODELS.dispatch, LIMITS)
    if got is None:
        return None
    try:
        return reading(_column_source(got, lambda: DECODER.read(raw, media)))
    except InvalidInput:
        return None


def spelled(value, rng: random.Random, ints: bool = False) -> str:
    """``value`` as JSON, spelled at random the ways JSON allows: whitespace between tokens,
    keys in any order, each number in one of several texts of the same value (integers left
    integers where ``ints``: the models' integer fields take no fraction)."""

    def ws() -> str:
        return rng.choice(["", "", " ", "\n  ", "\t", "\r\n"])

    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        inner = ",".join(
            f"{ws()}{json.dumps(k)}{ws()}:{ws()}{spelled(v, rng, k in _INT_FIELDS)}{ws()}"
            for k, v in items
        )
        return "{" + (inner or ws()) + "}"
    if isinstance(value, list):
        inner = ",".join(f"{ws()}{spelled(v, rng, ints)}{ws()}" for v in value)
        return "[" + (inner or ws()) + "]"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value)
    if ints and isinstance(value, int):
        return str(value)
    x = float(value)
    forms = [repr(x), f"{x:.17g}", f"{x:.17e}", f"{x:.16E}", json.dumps(value)]
    if x == int(x) and abs(x) < 1e15:
        forms += [str(int(x)), f"{int(x)}.000", f"{int(x)}e0", f"{x / 10!r}e1"]
    form = rng.choice(forms)
    return form if float(form) == x else repr(x)


_INT_FIELDS = frozenset({"items", "item_counts", "max_orders_per_rider", "candidate_riders"})


def encoded(fields: dict, media: str) -> bytes:
    return json.dumps(fields).encode() if media == codec.JSON else msgpack.packb(fields)


@pytest.mark.parametrize("media", [codec.JSON, codec.MSGPACK])
@pytest.mark.parametrize(
    ("riders", "orders", "seed"), [(0, 2, 1), (1, 1, 0), (12, 5, 2), (40, 20, 3)]
)
def test_a_round_is_read_into_the_columns_the_grpc_reader_makes(riders, orders, seed, media):
    round_ = generate_round(riders, orders, seed=seed)
    fields = round_fields(round_, 3600.0)
    got = read_body_round(encoded(fields, media), media, MODELS.dispatch, LIMITS)
    message = pb.DispatchRequest(**fields).SerializeToString()
    want = read_round(message, MODELS.dispatch, LIMITS)
    assert got is not None and want is not None
    for name in want.riders.__dataclass_fields__:
        a, b = getattr(want.riders, name), getattr(got.riders, name)
        assert (a == b) if isinstance(a, list) else (a.tobytes() == b.tobytes()), name
    assert got.orders.to_orders() == want.orders.to_orders() == round_.orders
    assert (got.weights, got.now, got.utc_offset_s, got.longest_route) == (
        want.weights,
        want.now,
        want.utc_offset_s,
        want.longest_route,
    )
    domain = rider_columns(round_.riders)
    assert got.riders.carried.tobytes() == domain.carried.tobytes()


def valid_body(seed: int, nulls: bool) -> dict:
    """A valid round's body with weights given (an int, a float, a bool), and where ``nulls``
    every optional field that may be null given as null."""
    body = base_body(8, 5, seed)
    body["weights"] = {"late_weight": 2, "max_orders_per_rider": 3, "etr_floor": seed % 2 == 0}
    if nulls:
        body["weights"]["candidate_riders"] = None
        for rider in body["riders"]:
            rider.setdefault("available_at", None)
    return body


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 40), spelling=st.integers(0, 2**32), nulls=st.booleans())
def test_a_valid_round_is_taken_however_it_is_spelled(seed, spelling, nulls):
    raw = spelled(valid_body(seed, nulls), random.Random(spelling)).encode()
    want = model_round(raw)
    assert want is not None
    assert reader_round(raw) == want, raw[:300]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), edits=EDITS, spelling=st.integers(0, 2**32))
def test_an_edited_body_is_taken_only_when_the_model_takes_it_and_read_the_same(
    seed, edits, spelling
):
    """The hostile edits of the decoder's test (a value set, a field deleted or added, the
    kind and the place drawn apart), each body spelled at random: where the reader takes a
    body the models take it too and read it the same."""
    raw = spelled(_edited(seed, edits), random.Random(spelling)).encode()
    got = reader_round(raw)
    if got is not None:
        assert got == model_round(raw), raw[:300]


def _with(raw: str) -> bytes:
    return raw.encode()


EMPTY = '{"now": 1, "riders": [], "orders": []}'


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("an escape in an id", base_body(2, 1, 0)),
        ("a repeated key", '{"now": 1, "now": 2, "riders": [], "orders": []}'),
        ("an unknown key", '{"now": 1, "riders": [], "orders": [], "x": 1}'),
        ("riders missing", '{"now": 1, "orders": []}'),
        ("a trailing comma", '{"now": 1, "riders": [], "orders": [],}'),
        ("trailing data", EMPTY + " x"),
        ("two values", EMPTY + EMPTY),
        ("a string for a number", '{"now": "1", "riders": [], "orders": []}'),
        ("true for a number", '{"now": true, "riders": [], "orders": []}'),
        ("null for weights", '{"now": 1, "riders": [], "orders": [], "weights": null}'),
        ("a fraction for an int", '{"now": 1, "riders": [], "orders": [], '
         '"weights": {"max_orders_per_rider": 2.0}}'),
        ("an exponent for an int", '{"now": 1, "riders": [], "orders": [], '
         '"weights": {"max_orders_per_rider": 2e0}}'),
        ("1 for a bool", '{"now": 1, "riders": [], "orders": [], "weights": {"etr_floor": 1}}'),
        ("NaN", '{"now": NaN, "riders": [], "orders": []}'),
        ("a number past the doubles", '{"now": 1e400, "riders": [], "orders": []}'),
        ("a byte-order mark", "\ufeff" + EMPTY),
        ("not an object", "[]"),
        ("empty", ""),
        ("cut short", EMPTY[:-1]),
        ("a control character in a string", '{"now": 1, "riders": [{"id": "a\\u0001'),
    ],
)  # fmt: skip
def test_bodies_the_reader_leaves_to_the_slower_readers(name, raw):
    if isinstance(raw, dict):  # an id with an escape: JSON's \u spelling of its character
        raw["orders"][0]["id"] = "é-order"
        raw = json.dumps(raw, ensure_ascii=True)
    if name == "a control character in a string":
        raw = raw.replace("\\u0001", "\x01") + '", "position": {"lat": 1, "lng": 1}}]}'
    body = _with(raw)
    assert read_json(body, MODELS.dispatch, LIMITS) is None, name
    # Whatever the slower readers answer stands: the decoder reads it as the models do.
    got = DECODER.decode(body)
    assert (None if got is None else reading(got)) == (
        model_round(body) if got is not None else None
    )


def test_an_escaped_body_the_reader_leaves_is_still_read_by_the_structs():
    body = base_body(3, 2, 1)
    body["orders"][0]["id"] = "é-order"
    raw = json.dumps(body, ensure_ascii=True).encode()
    assert read_json(raw, MODELS.dispatch, LIMITS) is None
    got = DECODER.decode(raw)
    assert got is not None and reading(got) == model_round(raw)
    # The same id as UTF-8 bytes (no escape): the reader takes it.
    raw = json.dumps(body, ensure_ascii=False).encode()
    assert reader_round(raw) == model_round(raw) is not None


def answer(raw: bytes, media: str, read) -> str:
    """What ``read(raw, media)`` answers, as a comparable text: the 413's text, "422",
    "read" (a round), or "left" (None: for the slower readers)."""
    try:
        got = read(raw, media)
    except TooLarge as exc:
        return str(exc)
    except InvalidInput:
        return "422"
    return "left" if got is None else "read"


def by_reader(raw: bytes, media: str) -> ColumnRound | None:
    return read_body_round(raw, media, MODELS.dispatch, LIMITS)


def by_model(raw: bytes, media: str) -> object:
    return codec.validate_body(raw, media, MODELS.dispatch)


def _long_route(body: dict, rider: int, stops: int) -> dict:
    """``body`` with rider ``rider``'s route ``stops`` long (its own stops repeated: a route
    the domain refuses, which the model, counting first, never reads)."""
    route = body["riders"][rider]["route"] or [{"order_id": "x", "kind": "pickup"}]
    body["riders"][rider]["route"] = (route * stops)[:stops]
    return body


@pytest.mark.parametrize("media", [codec.JSON, codec.MSGPACK])
def test_a_round_past_a_limit_is_the_models_413_from_the_reader(media):
    """Past a limit, the reader reads what the model reads before it and counts the rest: its
    413 is the model's, the first list past its limit in the model's order."""
    r, o, stops = LIMITS.max_riders, LIMITS.max_orders, LIMITS.max_route_stops
    cases = {
        "riders": base_body(r + 1, 1, 0),
        "orders": base_body(2, o + 1, 0),
        "both": base_body(3 * r, o + 5, 0),  # riders first
        "a route": _long_route(base_body(5, 3, 1), 3, stops + 1),
        "a route and the riders": _long_route(base_body(r + 2, 3, 1), 7, stops + 2),
        "a route past the riders' limit": _long_route(base_body(r + 2, 3, 1), r + 1, stops + 2),
    }
    for name, body in cases.items():
        raw = encoded(body, media)
        want = answer(raw, media, by_model)
        assert "exceeds the limit" in want, name
        assert answer(raw, media, by_reader) == want, name
        assert answer(raw, media, DECODER.read) == want, name


def test_the_sign_of_zero_is_the_models():
    """An integer zero is the int 0 to the models (+0.0 as a float); a fractional one keeps
    its sign."""
    for text, sign in (("-0", 1.0), ("-0.0", -1.0), ("0", 1.0)):
        raw = _with(f'{{"now": 1, "riders": [], "orders": [], "utc_offset_s": {text}}}')
        got = read_json(raw, MODELS.dispatch, LIMITS)
        model = DispatchRequest.model_validate_json(raw)
        assert got is not None
        assert math.copysign(1.0, got.utc_offset_s) == math.copysign(1.0, model.utc_offset_s)
        assert math.copysign(1.0, got.utc_offset_s) == sign


def packed(value, rng: random.Random) -> bytes:
    """``value`` as msgpack, spelled at random: keys in any order, and each float that a
    single holds exactly written as one (the models read the same number)."""

    def shuffled(v):
        if isinstance(v, dict):
            items = [(k, shuffled(x)) for k, x in v.items()]
            rng.shuffle(items)
            return dict(items)
        if isinstance(v, list):
            return [shuffled(x) for x in v]
        return v

    single = rng.random() < 0.5
    return msgpack.packb(shuffled(value), use_single_float=single)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 40), spelling=st.integers(0, 2**32), nulls=st.booleans())
def test_a_valid_msgpack_round_is_taken_however_it_is_packed(seed, spelling, nulls):
    raw = packed(valid_body(seed, nulls), random.Random(spelling))
    want = model_round(raw, codec.MSGPACK)
    assert want is not None
    assert reader_round(raw, codec.MSGPACK) == want


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 50), edits=MSGPACK_EDITS, spelling=st.integers(0, 2**32))
def test_an_edited_msgpack_body_is_taken_only_when_the_model_takes_it_and_read_the_same(
    seed, edits, spelling
):
    """As for JSON, with the values only msgpack carries among the edits (non-finite floats,
    binary and extension data, integers past 2^53, long strings, non-string keys)."""
    try:
        raw = packed(_edited(seed, edits), random.Random(spelling))
    except (OverflowError, TypeError, ValueError):  # an integer past 64 bits
        return
    got = reader_round(raw, codec.MSGPACK)
    if got is not None:
        assert got == model_round(raw, codec.MSGPACK)


EMPTY_MSGPACK = msgpack.packb({"now": 1, "riders": [], "orders": []})


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("trailing bytes", EMPTY_MSGPACK + b"\x00"),
        ("cut short", EMPTY_MSGPACK[:-1]),
        ("not a map", msgpack.packb([1, 2])),
        ("a non-string key", msgpack.packb({"now": 1, "riders": [], "orders": [], 1: 2})),
        ("binary for an id", msgpack.packb({"now": 1, "orders": [], "riders": [{"id": b"r"}]})),
        ("nil for weights", msgpack.packb({"now": 1, "riders": [], "orders": [], "weights": None})),
        ("a float for an int", msgpack.packb(
            {"now": 1, "riders": [], "orders": [], "weights": {"max_orders_per_rider": 2.0}})),
        ("1 for a bool", msgpack.packb(
            {"now": 1, "riders": [], "orders": [], "weights": {"etr_floor": 1}})),
        ("an integer past 2^53", msgpack.packb({"now": 2**60, "riders": [], "orders": []})),
        ("infinity", msgpack.packb({"now": float("inf"), "riders": [], "orders": []})),
        ("a list claiming more than it holds", bytes([0x83, 0xA3]) + b"now" + bytes([1, 0xA6])
         + b"riders" + bytes([0xDD, 0xFF, 0xFF, 0xFF, 0xFF])),
        ("an extension", msgpack.packb(
            {"now": msgpack.ExtType(1, b"x"), "riders": [], "orders": []})),
    ],
)  # fmt: skip
def test_msgpack_bodies_the_reader_leaves_to_the_slower_readers(name, raw):
    assert read_body_round(raw, codec.MSGPACK, MODELS.dispatch, LIMITS) is None, name
    got = DECODER.decode(raw, codec.MSGPACK)
    assert (None if got is None else reading(got)) == (
        model_round(raw, codec.MSGPACK) if got is not None else None
    )


def _set(body: dict, path: tuple, value) -> dict:
    at = body
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = value
    return body


@pytest.mark.parametrize("media", [codec.JSON, codec.MSGPACK])
def test_past_a_limit_the_reader_gives_a_413_only_where_the_model_does(media):
    """Rounds past a limit with something else wrong: before the limit (the model's list
    stops there: its 422, or the other list's 413), after it (never read: the 413), or not
    the form's (the whole body refused: the 422). The reader answers the model's 413 or leaves
    the body; where the model does not answer 413, the reader never does."""
    r, o = LIMITS.max_riders, LIMITS.max_orders
    last_kept, past = r - 1, r + 1

    def over() -> dict:
        return base_body(r + 2, 3, 4)

    cases = {
        # the model's 422: a kept rider breaks a rule, the riders' list stops there
        "a kept rider's speed": (_set(over(), ("riders", last_kept, "speed_mps"), -1.0), "422"),
        "a kept rider's unknown field": (_set(over(), ("riders", 0, "x"), 1), "422"),
        "a kept rider's id too long": (_set(over(), ("riders", 3, "id"), "r" * 200), "422"),
        "a kept carried order's promise": (
            _set(
                over(),
                ("riders", 0, "orders"),
                [{**base_body(1, 1, 0)["orders"][0], "promised_at": 1.0, "created_at": 2.0}],
            ),
            "422",
        ),
        # past the limit: never read by the model
        "a rider past the limit's speed": (
            _set(over(), ("riders", past, "speed_mps"), -1.0),
            "riders",
        ),
        "a rider past the limit's unknown field": (
            _set(over(), ("riders", past, "x"), 1),
            "riders",
        ),
        # the other list past its limit with a kept rider broken: the orders' 413
        "orders past the limit, a rider broken": (
            _set(base_body(3, o + 1, 5), ("riders", 1, "capacity"), -5.0),
            "orders",
        ),
        # the top level broken: the model's 413 stands, the reader leaves it
        "no now": ({k: v for k, v in over().items() if k != "now"}, "riders"),
    }
    if media == codec.MSGPACK:
        cases["binary past the limit"] = (_set(over(), ("riders", past, "id"), b"r"), "422")
        cases["an extension past the limit"] = (
            _set(over(), ("riders", past, "x"), msgpack.ExtType(1, b"x")),
            "422",
        )
    else:
        cases["an escape past the limit"] = (_set(over(), ("riders", past, "id"), "é"), "riders")
    for name, (body, want) in cases.items():
        raw = json.dumps(body).encode() if media == codec.JSON else msgpack.packb(body)
        model = answer(raw, media, by_model)
        assert model == "422" if want == "422" else model.startswith(want + ":"), (name, model)
        got = answer(raw, media, by_reader)
        assert got in ("left", model), (name, got, model)
        if "past the limit's" in name:  # counted, not validated: the reader's own 413
            assert got == model, name
        assert answer(raw, media, DECODER.read) == model, name


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 50),
    riders=st.integers(LIMITS.max_riders - 1, LIMITS.max_riders + 3),
    orders=st.integers(LIMITS.max_orders - 1, LIMITS.max_orders + 3),
    long_route=st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(20, 30))),
    edits=st.one_of(st.just([]), MSGPACK_EDITS),
    media=st.sampled_from([codec.JSON, codec.MSGPACK]),
    spelling=st.integers(0, 2**32),
)
def test_the_readers_413_is_always_the_models(
    seed, riders, orders, long_route, edits, media, spelling
):
    """Rounds about the limits (riders, orders, a route's stops), with hostile edits anywhere
    (after the limits too: what the model never reads past a limit is still read as msgpack
    or JSON, which may refuse it) and spelled at random: where the reader answers 413, the
    model answers the same 413; where it takes the round, the model takes it."""
    body = base_body(riders, orders, seed)
    if long_route is not None and riders:
        body = _long_route(body, long_route[0] % riders, long_route[1])
    body = edited(body, edits)
    rng = random.Random(spelling)
    try:
        raw = spelled(body, rng).encode() if media == codec.JSON else packed(body, rng)
    except (OverflowError, TypeError, ValueError):  # an integer past 64 bits
        return
    got = answer(raw, media, by_reader)
    event(f"the reader: {got.split(':')[0]}")
    if got != "left":
        assert got == answer(raw, media, by_model), raw[:300]


def _smallest_round_at_the_limits() -> dict:
    """A valid round at ``LIMITS`` (every rider, every new order, a route of the most stops)
    with the fewest bytes each element can take: short ids, small integers, no optional
    field. The readers size their columns from the body's bytes; this holds the bounds they
    use to be bounds, at the limits."""
    now = 1_767_225_600

    def order(name: str) -> dict:
        here = {"lat": 1, "lng": 1}
        return {
            "id": name, "pickup": here, "dropoff": here,
            "created_at": now, "ready_at": now, "promised_at": now + 900,
        }  # fmt: skip

    carrying = LIMITS.max_route_stops // 2  # each carried order: a pickup and a drop-off
    busy = {
        "id": "b", "position": {"lat": 1, "lng": 1}, "speed_mps": 5, "capacity": carrying,
        "orders": [order(f"c{k}") for k in range(carrying)],
        "route": [{"order_id": f"c{k}", "kind": kind}
                  for k in range(carrying) for kind in ("pickup", "dropoff")],
    }  # fmt: skip
    idle = [
        {"id": f"{k}", "position": {"lat": 1, "lng": 1}, "speed_mps": 5, "capacity": 1}
        for k in range(LIMITS.max_riders - 1)
    ]
    new = [order(f"n{k}") for k in range(LIMITS.max_orders)]
    return {"now": now, "riders": [busy, *idle], "orders": new}


@pytest.mark.parametrize("media", [codec.JSON, codec.MSGPACK])
def test_the_smallest_round_at_the_limits_is_taken(media):
    body = _smallest_round_at_the_limits()
    raw = (
        json.dumps(body, separators=(",", ":")).encode()
        if media == codec.JSON
        else (msgpack.packb(body))
    )
    want = model_round(raw, media)
    assert want is not None
    assert reader_round(raw, media) == want
