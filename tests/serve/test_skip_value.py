"""The round walk's skip past a limit (``_round_walk_jit._skip_value``): any JSON or msgpack
value is stepped over to exactly its end, or refused; never stepped over where the slower
readers might refuse it.

A list past its limit is answered 413 by the model only where everything after the limit is
still read as JSON or msgpack (``round_body``): the walk skips those values without keeping
them, so a skip that ended a value early or late, or took what ``json.loads`` or
``codec.unpack_msgpack`` refuse, would give a 413 where the model answers otherwise. Values of
every kind are drawn, nested, spelled at random; each is followed by one more byte, which the
skip must stop at."""

from __future__ import annotations

import json
import random

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit

from kernels.bare_pointer import data_pointer
from serve_app.http import _round_walk_jit as walk
from serve_app.http import codec
from serve_app.pipeline.errors import InvalidInput

from .test_round_body import spelled


@njit(cache=True)
def skip(body, form):
    return walk._skip_value(data_pointer(body), 0, len(body), form)


def skipped(raw: bytes, form: int) -> int:
    """Where the skip ends the value at the start of ``raw`` + one byte more (-1: refused)."""
    return skip(np.frombuffer(raw + b"]", np.uint8), form)


PLAIN_TEXT = st.text(
    st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'), max_size=12
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53), 2**53),
    # Normal doubles (the reader refuses subnormals, never reading a number inexactly).
    st.floats(-1e300, 1e300).filter(lambda x: x == 0 or abs(x) > 1e-300),
    PLAIN_TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(PLAIN_TEXT, inner, max_size=4)
    ),
    max_leaves=20,
)


def depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES, spelling=st.integers(0, 2**32))
def test_a_plain_value_is_skipped_to_its_end_in_both_forms(value, spelling):
    """ASCII strings, integers a double holds, finite floats, nested at most SKIP_DEPTH:
    stepped over exactly (JSON spelled at random: whitespace, number forms)."""
    text = spelled(value, random.Random(spelling)).encode()
    packed = msgpack.packb(value)
    if depth(value) > walk.SKIP_DEPTH:
        assert skipped(text, walk.JSON) == skipped(packed, walk.MSGPACK) == -1
        return
    assert skipped(text, walk.JSON) == len(text), text
    assert skipped(packed, walk.MSGPACK) == len(packed), packed


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=VALUES, cut=st.integers(1, 50), byte=st.integers(0, 255))
def test_what_the_skip_takes_the_readers_take(value, cut, byte):
    """Any value, cut short or with a byte changed: where the skip steps over a prefix of
    the bytes, that prefix is one whole value to ``json.loads`` and to the msgpack reader."""
    for raw, form in (
        (json.dumps(value).encode(), walk.JSON),
        (msgpack.packb(value), walk.MSGPACK),
    ):
        for broken in (raw[: max(0, len(raw) - cut)], _changed(raw, cut, byte)):
            end = skip(np.frombuffer(broken, np.uint8), form)
            if end < 0:
                continue
            head = broken[:end]
            if form == walk.JSON:
                json.loads(head)
            elif not codec.msgpack_is_counted(head):  # round_body leaves those to the model
                codec.unpack_msgpack(head)


def _changed(raw: bytes, at: int, byte: int) -> bytes:
    out = bytearray(raw)
    if out:
        out[at % len(out)] = byte
    return bytes(out)


WIDE = codec.MSGPACK_MAX_MAP + 1
BOTH = (walk.JSON, walk.MSGPACK)


@pytest.mark.parametrize(
    ("name", "value", "forms"),
    [
        ("a string with a character past ASCII", "é", BOTH),
        ("a string past the msgpack reader's length", "a" * (codec.MSGPACK_MAX_STR + 1), BOTH),
        ("nested past SKIP_DEPTH", [[[[[[[[[1]]]]]]]]], BOTH),
        # msgpack's reader holds these; the walk's does not read them (JSON's does)
        ("an integer past 2^53", 2**60, (walk.MSGPACK,)),
        ("a map past the msgpack reader's width", dict.fromkeys(map(str, range(WIDE)), 1),
         (walk.MSGPACK,)),
    ],
)  # fmt: skip
def test_values_the_skip_refuses(name, value, forms):
    for form in forms:
        raw = (
            json.dumps(value, ensure_ascii=False).encode()
            if form == walk.JSON
            else msgpack.packb(value)
        )
        assert skipped(raw, form) == -1, (name, form)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("binary", msgpack.packb(b"x")),
        ("an extension", msgpack.packb(msgpack.ExtType(1, b"x"))),
        ("a non-string key", msgpack.packb({1: 2})),
        ("a list longer than the reader's bound", bytes([0xDD, 0, 1, 0x86, 0xA1]) + b"\x00" * 8),
    ],
)  # fmt: skip
def test_msgpack_values_the_readers_refuse_are_refused(name, raw):
    assert skipped(raw, walk.MSGPACK) == -1, name
    with pytest.raises(InvalidInput):
        codec.unpack_msgpack(raw)


def test_json_values_the_reader_refuses_are_refused():
    for raw in (b"NaN", b"[1,]", b'{"a" 1}', b'{"a": 1,}', b"tru", b'"\\n"', b"[", b"[1 2]"):
        assert skip(np.frombuffer(raw, np.uint8), walk.JSON) == -1, raw
