"""The compiled reader of JSON numbers returns exactly what ``float`` returns, or refuses.

``serve_app.http._json_number_jit.read_number`` is how the JSON round reader reads every
number of a body; a last-bit difference would plan a different round than the model reads.
Python's ``float`` rounds correctly (to nearest, ties to even), so it is the oracle: random
doubles' shortest texts, random digit strings with random exponents, the exact halfway points
between neighbouring doubles, and the grammar's edges."""

from __future__ import annotations

import math
import random
import struct
from fractions import Fraction

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from serve_app.http._json_number_jit import read_numbers


def read(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(values, taken) of each text read whole by the compiled reader."""
    data = "".join(texts).encode()
    ends = np.cumsum([len(t.encode()) for t in texts])
    spans = np.stack([ends - [len(t.encode()) for t in texts], ends], axis=1).astype(np.int64)
    out = np.zeros(len(texts))
    taken = np.zeros(len(texts), np.bool_)
    read_numbers(np.frombuffer(data, np.uint8), spans, out, taken)
    return out, taken


def python_reading(text: str) -> float:
    """The double the models read for a JSON number: an integer text is an int, then a
    float (so -0 is +0.0); anything else ``float``."""
    return float(int(text)) if not any(c in text for c in ".eE") else float(text)


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def assert_same(texts: list[str], at_least: float) -> None:
    values, taken = read(texts)
    for text, value, ok in zip(texts, values, taken, strict=True):
        if ok:
            assert bits(value) == bits(python_reading(text)), text
    assert taken.mean() >= at_least


def test_random_doubles_shortest_texts_read_as_float_reads_them():
    rng = random.Random(7)
    texts = []
    for _ in range(60_000):
        x = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(x) and (x == 0 or abs(x) >= 2.2250738585072014e-308):
            texts.append(repr(x))
        texts.append(repr(rng.uniform(-200, 200)))
        texts.append(repr(rng.uniform(1.6e9, 1.8e9)))
    assert_same(texts, at_least=0.999)


def test_digit_strings_with_exponents_read_as_float_reads_them():
    rng = random.Random(8)
    texts = []
    for _ in range(60_000):
        digits = rng.randint(1, 19)
        w = rng.randint(0, 10**digits - 1)
        sign = "-" if rng.random() < 0.5 else ""
        texts.append(f"{sign}{w}e{rng.randint(-40, 40)}")
        texts.append(f"{sign}{w}")
        point = rng.randint(1, digits)
        text = str(w).rjust(digits, "0")
        texts.append(f"{sign}{int(text[:point])}.{text[point:] or '0'}E+{rng.randint(0, 5)}")
    assert_same(texts, at_least=0.99)


def test_halfway_points_round_to_even_as_float_does():
    rng = random.Random(9)
    texts = []
    for _ in range(20_000):
        x = rng.choice([rng.uniform(1e-3, 1e3), float(rng.randint(2**53, 2**60))])
        mid = (Fraction(x) + Fraction(math.nextafter(x, math.inf))) / 2
        texts.append(f"{mid.numerator / mid.denominator:.25g}")
        # Exact midpoints that are integers: ties between doubles above 2^53.
        if mid.denominator == 1 and mid.numerator < 10**19:
            texts.append(str(mid.numerator))
    texts += [str(2**53 + 1), str(2**53 + 3), "9007199254740993.0"]
    texts.append("1.00000000000000011102230246251565")  # 1 + half an ulp: past 19 digits
    assert_same(texts, at_least=0.5)


def test_the_grammars_edges():
    values, taken = read(["0", "-0", "-0.0", "0.0", "0e5", "1E2", "1e+2", "1.5e-3", "-1"])
    assert taken.all()
    assert [bits(v) for v in values] == [
        bits(v) for v in (0.0, 0.0, -0.0, 0.0, 0.0, 100.0, 100.0, 0.0015, -1.0)
    ]
    # Not JSON numbers, or numbers this reader leaves to a slower one: refused, never misread.
    refused = [
        "01", "1.", ".5", "-", "1e", "1e+", "--1", "+1", "1.e5", "0x10", "Infinity", "NaN",
        "1e400", "1e-400", "4.9e-324", "12345678901234567890", "1" * 40,
    ]  # fmt: skip
    _, taken = read(refused)
    assert not taken.any()


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_any_finite_double_in_several_spellings(x):
    texts = [repr(x), f"{x:.17g}", f"{x:.17e}", f"{x:.16E}"]
    values, taken = read(texts)
    for text, value, ok in zip(texts, values, taken, strict=True):
        if ok:
            assert bits(value) == bits(float(text)), text
    # Refused only under the normal doubles (subnormals go to the slower readers).
    assert taken[0] or abs(x) < 2.2250738585072014e-308
