"""The gRPC round reader never accepts what the models refuse, nor reads a message differently.

``serve_app.grpc_api.round_message`` reads a ``DispatchRequest``'s bytes straight into columns
and returns None for anything it does not take whole (protobuf's parser and the pydantic
models then give the answer). So for every message: if the reader takes it, protobuf's parse
read by the models accepts it too, with the same new orders and weights, and the round packs
to the same arrays; and every message a serializer writes for a valid round is taken."""

from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from planner import generate_round
from planner.rider_columns import rider_columns
from serve_app.grpc_api import convert
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api.round_message import read_round
from serve_app.pipeline.errors import InvalidInput
from serve_app.schemas import DispatchRequest, round_fields

from .test_round_decoder import DECODER, LIMITS, MODELS, base_body, reading


def message_bytes(body: dict, edit=None) -> bytes:
    msg = pb.DispatchRequest(**body)
    if edit is not None:
        edit(msg)
    return msg.SerializeToString()


def model_reading(data: bytes):
    """Protobuf's parse of ``data`` read by the models (``reading``), or None where either
    refuses it."""
    try:
        fields = convert.message_to_dict(pb.DispatchRequest.FromString(data))
        req = MODELS.dispatch.model_validate(fields)
        req.to_domain()
        return reading(req.to_source())
    except (DecodeError, ValidationError, InvalidInput):
        return None


def fast_reading(data: bytes):
    """The reader's reading of ``data``, or None where it leaves the message to the models
    (at the read, or as the model's ``InvalidInput`` when the round is packed)."""

    def by_model():
        fields = convert.message_to_dict(pb.DispatchRequest.FromString(data))
        return MODELS.dispatch.model_validate(fields).to_source()

    got = DECODER.from_message(data, by_model)
    if got is None:
        return None
    try:
        return reading(got)
    except (ValidationError, InvalidInput):
        return None


@pytest.mark.parametrize(("riders", "orders", "seed"), [(0, 2, 1), (12, 5, 2), (40, 20, 3)])
def test_a_served_round_is_read_into_the_columns_its_domain_round_makes(riders, orders, seed):
    round_ = generate_round(riders, orders, seed=seed)
    data = pb.DispatchRequest(**round_fields(round_, 3600.0)).SerializeToString()
    got = read_round(data, MODELS.dispatch, LIMITS)
    assert got is not None
    want = rider_columns(round_.riders)
    for name in want.__dataclass_fields__:
        a, b = getattr(want, name), getattr(got.riders, name)
        assert (a == b) if isinstance(a, list) else np.array_equal(a, b, equal_nan=True), name
    assert (got.orders.to_orders(), got.weights, got.now, got.utc_offset_s) == (
        round_.orders,
        round_.weights,
        round_.now,
        3600.0,
    )
    assert fast_reading(data) == model_reading(data) is not None


def _rider_with_route(m):
    return next(r for r in m.riders if r.route)


@pytest.mark.parametrize(
    "edit",
    [
        None,
        lambda m: setattr(m.riders[0], "speed_mps", float("inf")),
        lambda m: setattr(m.riders[0], "capacity", float("nan")),
        lambda m: setattr(_rider_with_route(m).orders[0], "size", float("inf")),
        lambda m: setattr(_rider_with_route(m).orders[0], "pickup_service_s", float("inf")),
        lambda m: setattr(m.orders[0], "promised_at", float("-inf")),
        lambda m: m.riders[0].ClearField("speed_mps"),
        lambda m: m.riders[0].position.ClearField("lat"),
        lambda m: m.orders[0].ClearField("dropoff"),
        lambda m: m.orders[0].ClearField("size"),  # the model's default
        lambda m: m.riders[0].ClearField("available_at"),
        lambda m: setattr(m.riders[0].position, "lat", 91.0),
        lambda m: setattr(_rider_with_route(m).route[0], "kind", "teleport"),
        lambda m: _rider_with_route(m).route[0].ClearField("kind"),
        lambda m: setattr(m, "now", float("nan")),
        lambda m: m.ClearField("now"),
        lambda m: setattr(m.riders[1], "id", m.riders[0].id),  # ids repeat
        lambda m: setattr(m.riders[0], "id", ""),
        lambda m: setattr(m.riders[0], "id", "r" * 129),
        lambda m: setattr(m.riders[0], "id", "rider\0with a NUL"),
        lambda m: setattr(m.riders[0], "id", "réunion-🚲"),
        lambda m: m.orders[0].item_counts.extend([3] * 30),  # past the list's bound
        lambda m: m.orders[0].item_counts.append(-1),
        lambda m: setattr(m.orders[0], "items", 10_001),
        lambda m: setattr(m.weights, "max_orders_per_rider", 0),
        lambda m: setattr(m.weights, "candidate_riders", 3),
        lambda m: setattr(m.weights, "etr_floor", False),
        lambda m: setattr(m, "utc_offset_s", 50_401.0),
        lambda m: _rider_with_route(m).picked_up.append("nobody's"),
    ],
)
def test_edited_messages_are_taken_when_the_model_takes_them_and_read_the_same(edit):
    data = message_bytes(base_body(12, 5, 7), edit)
    want = model_reading(data)
    assert fast_reading(data) == want
    if want is not None:  # what a serializer writes for a valid round is taken
        assert read_round(data, MODELS.dispatch, LIMITS) is not None


def _field(number: int, wire: int, payload: bytes) -> bytes:
    """A field as protobuf writes it (wire 0: ``payload`` is the varint's bytes; 1: 8 bytes;
    2: length-delimited)."""
    key = bytes([number << 3 | wire]) if number < 16 else bytes([(number << 3 | wire) | 0x80, 1])
    if wire == 2:
        return key + _varint(len(payload)) + payload
    return key + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


@pytest.mark.parametrize(
    ("name", "tail"),
    [
        ("an unknown field", _field(15, 2, b"anything")),
        ("an unknown varint", _field(6, 0, _varint(7))),
        ("now given twice (the parser keeps the last)", _field(1, 1, b"\0" * 8)),
        ("now with another wire type", _field(1, 0, _varint(5))),
        ("weights given twice (the parser merges)", _field(4, 2, _field(1, 1, b"\0" * 8))),
        ("a field numbered 0", b"\x02\x00"),
        ("a field numbered past 2**29 - 1", _varint((1 << 29) << 3 | 2) + b"\x00"),
        ("a group", b"\x0b\x0c"),
        ("a length past the end", b"\x12\x7f"),
        ("a varint past the end", b"\x08\xff"),
        ("a rider that is not a message", _field(2, 2, b"\xff\xff\xff")),
    ],
)
def test_wire_forms_the_reader_does_not_take_whole_are_left_to_the_parser(name, tail):
    """Whatever the bytes (unknown, repeated or ill-typed fields, malformed ends), the reader
    takes them only where protobuf's parse read by the model gives the same round."""
    data = message_bytes(base_body(6, 3, 2)) + tail
    assert fast_reading(data) in (None, model_reading(data)), name


def test_item_counts_are_read_packed_and_unpacked():
    body = base_body(3, 2, 4)
    packed = message_bytes(body)
    # The first new order again, its item counts unpacked (one varint field each).
    order = pb.Order(**body["orders"][0])
    counts = list(order.item_counts) or [2, 5]
    order.ClearField("item_counts")
    unpacked = order.SerializeToString() + b"".join(_field(9, 0, _varint(c)) for c in counts)
    msg = pb.DispatchRequest.FromString(packed)
    msg.ClearField("orders")
    data = msg.SerializeToString() + _field(3, 2, unpacked)
    for k in range(1, len(body["orders"])):
        data += _field(3, 2, pb.Order(**body["orders"][k]).SerializeToString())
    got = read_round(data, MODELS.dispatch, LIMITS)
    assert got is not None and got.orders.to_orders()[0].item_counts == tuple(counts)
    assert fast_reading(data) == model_reading(data) is not None


def _scalar_places(msg):
    """(message, field name) of every single scalar field set in ``msg``, nested."""
    for field, value in msg.ListFields():
        if field.message_type is None:
            if not field.is_repeated:
                yield msg, field.name
        elif field.is_repeated:
            for item in value:
                yield from _scalar_places(item)
        else:
            yield from _scalar_places(value)


VALUES = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 0.0, -1.0, 1e308, -1e308, ""]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**31), 2**31 - 1),
    st.text(max_size=5),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 50),
    edits=st.lists(
        st.tuples(st.integers(0, 10**6), st.sampled_from(["set", "clear"]), VALUES),
        min_size=1,
        max_size=3,
    ),
)
def test_any_edit_of_a_set_scalar_is_taken_exactly_when_the_model_takes_it(seed, edits):
    """A round with any of its set scalars changed (non-finite numbers, out of range, another
    type where the protobuf field takes it) or cleared: the reader takes it exactly when the
    model does, and reads it the same."""

    def edit(m):
        for pick, how, value in edits:
            places = list(_scalar_places(m))
            if not places:
                return
            msg, name = places[pick % len(places)]
            if how == "clear":
                msg.ClearField(name)
                continue
            with contextlib.suppress(TypeError, ValueError):  # the field does not take it
                setattr(msg, name, value)

    data = message_bytes(base_body(6, 4, seed), edit)
    assert fast_reading(data) == model_reading(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 20),
    cut=st.integers(0, 10**6),
    insert=st.binary(max_size=12),
)
def test_any_bytes_spliced_into_a_round_are_read_as_the_parser_reads_them_or_left(
    seed, cut, insert
):
    """Bytes spliced anywhere into a valid message (most make it malformed, some add or
    repeat fields): the reader leaves it, or reads what protobuf's parse read by the model
    reads."""
    data = message_bytes(base_body(4, 3, seed))
    at = cut % (len(data) + 1)
    spliced = data[:at] + insert + data[at:]
    assert fast_reading(spliced) in (None, model_reading(spliced))


def test_the_reader_takes_its_bounds_and_defaults_from_the_model_it_is_given():
    """No rule is restated in the reader: a model with a tighter speed bound and another
    default order size reads the same message under them."""
    from pydantic import Field, create_model

    from serve_app.schemas import OrderIn, RiderIn

    slow = create_model("SlowRider", __base__=RiderIn, speed_mps=(float, Field(ge=0.1, le=5.0)))
    big = create_model("BigOrder", __base__=OrderIn, size=(float, Field(2.5, ge=0.001, le=9.0)))
    slow_round = create_model("SlowRound", __base__=DispatchRequest, riders=(list[slow], ...))
    big_round = create_model("BigRound", __base__=DispatchRequest, orders=(list[big], ...))
    body = base_body(3, 2, 5)

    def fast(m):
        for r in m.riders:
            r.speed_mps = 4.0
        m.riders[0].speed_mps = 9.0

    def unsized(m):
        m.orders[0].ClearField("size")

    assert read_round(message_bytes(body, fast), DispatchRequest, LIMITS) is not None
    assert read_round(message_bytes(body, fast), slow_round, LIMITS) is None
    got = read_round(message_bytes(body, unsized), big_round, LIMITS)
    assert got is not None and got.orders.to_orders()[0].size == 2.5


def _order_msg(name: str) -> pb.Order:
    here = pb.Position(lat=1.0, lng=1.0)
    return pb.Order(
        id=name, pickup=here, dropoff=here, created_at=1.0, ready_at=1.0, promised_at=2.0
    )


def _rider_msg(name: str, stops: int = 0, carried: int = 0, picked: int = 0) -> pb.Rider:
    return pb.Rider(
        id=name,
        position=pb.Position(lat=1.0, lng=1.0),
        speed_mps=1.0,
        capacity=2.0,
        route=[pb.Stop(order_id="a", kind="dropoff") for _ in range(stops)],
        orders=[_order_msg(f"{name}-{k}") for k in range(carried)],
        picked_up=[f"{name}-{k}" for k in range(picked)],
    )


@pytest.mark.parametrize(
    ("what", "message"),
    [
        (
            "riders",
            lambda n: pb.DispatchRequest(
                now=1.0, riders=[_rider_msg(f"r{k}") for k in range(n.max_riders + 1)]
            ),
        ),
        (
            "orders",
            lambda n: pb.DispatchRequest(
                now=1.0, orders=[_order_msg(f"o{k}") for k in range(n.max_orders + 1)]
            ),
        ),
        (
            "route stops",
            lambda n: pb.DispatchRequest(
                now=1.0, riders=[_rider_msg("r", stops=n.max_route_stops + 1)]
            ),
        ),
        (
            "orders on a route",
            lambda n: pb.DispatchRequest(
                now=1.0, riders=[_rider_msg("r", carried=n.max_route_stops + 1)]
            ),
        ),
        (
            "picked-up orders",
            lambda n: pb.DispatchRequest(
                now=1.0, riders=[_rider_msg("r"), _rider_msg("s", picked=n.max_route_stops + 3)]
            ),
        ),
    ],
)
def test_the_reader_holds_the_lists_to_the_limits_as_the_parsers_path_does(what, message):
    """The reader counts the lists in its own compiled pass (the parser's path counts them in
    Python, ``wire.check_counts``): the same list named, under the same limit, before
    anything is built; one under every limit is not refused for its lengths."""
    from serve_app.grpc_api import wire
    from serve_app.pipeline.errors import TooLarge

    data = message(LIMITS).SerializeToString()
    with pytest.raises(TooLarge) as by_reader:
        read_round(data, MODELS.dispatch, LIMITS)
    with pytest.raises(TooLarge) as by_wire:
        wire.check_counts(data, "dispatch", LIMITS)
    assert (by_reader.value.what, by_reader.value.limit) == (what, by_wire.value.limit)
    # The parser's path stops counting one past the limit; the reader says the whole count.
    assert by_wire.value.what == what and by_wire.value.got == by_wire.value.limit + 1
    assert by_reader.value.got == by_wire.value.limit + (3 if what == "picked-up orders" else 1)
    at_limit = pb.DispatchRequest(now=1.0, riders=[_rider_msg("r", stops=LIMITS.max_route_stops)])
    read_round(at_limit.SerializeToString(), MODELS.dispatch, LIMITS)  # no TooLarge


def test_the_reader_and_the_wire_count_refuse_the_same_lists_on_seeded_messages():
    """300 seeded messages whose list lengths fall on either side of each limit (riders, new
    orders, and per rider its stops, carried orders and picked-up names, several riders near
    their limits at once): the reader refuses exactly those the parser's path refuses, naming
    the same list under the same limit."""
    import random

    from serve_app.grpc_api import wire
    from serve_app.pipeline.errors import TooLarge

    def around(rng: random.Random, limit: int) -> int:
        return max(0, limit + rng.choice((-2, -1, 0, 0, 1, 2)))

    def verdict(read, *args):
        try:
            read(*args)
        except TooLarge as exc:
            return exc.what, exc.limit
        return None

    rng = random.Random(5)
    refused = 0
    for _ in range(300):
        riders = [
            _rider_msg(
                f"r{k}",
                stops=around(rng, LIMITS.max_route_stops) if rng.random() < 0.3 else 1,
                carried=around(rng, LIMITS.max_route_stops) if rng.random() < 0.3 else 1,
                picked=around(rng, LIMITS.max_route_stops) if rng.random() < 0.3 else 0,
            )
            for k in range(around(rng, LIMITS.max_riders) if rng.random() < 0.3 else 3)
        ]
        orders = [
            _order_msg(f"o{k}")
            for k in range(around(rng, LIMITS.max_orders) if rng.random() < 0.3 else 2)
        ]
        data = pb.DispatchRequest(now=1.0, riders=riders, orders=orders).SerializeToString()
        by_wire = verdict(wire.check_counts, data, "dispatch", LIMITS)
        by_reader = verdict(read_round, data, MODELS.dispatch, LIMITS)
        # Which list is named first may differ where two pass their limits: both refuse.
        assert (by_wire is None) == (by_reader is None), (by_wire, by_reader)
        refused += by_wire is not None
    assert 50 < refused < 250  # both sides of the limits were tried
