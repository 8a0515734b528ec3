"""msgpack's numbers as the compiled round walk reads them: exactly the value msgpack's own
reader gives, or refused.

``serve_app.http._msgpack_tokens_jit.number`` builds each float from its bits with ``ldexp``
(no bit cast) and each integer from its big-endian bytes; a last-bit difference would plan a
different round than the model reads. The oracle is ``msgpack.unpackb``: random bit patterns
of both float widths (subnormals, zeros, infinities and NaN among them) and every integer
width at and past its edges and past 2^53, which the walk refuses (a double does not hold it
exactly)."""

from __future__ import annotations

import math
import random
import struct

import msgpack
import numpy as np

from serve_app.http import _msgpack_tokens_jit as tokens

MAX_EXACT = 2**53


def read(raw: bytes) -> tuple[float, bool, int]:
    return tokens.number(np.frombuffer(raw, np.uint8), 0, len(raw))


def same(value: float, want: float) -> bool:
    if math.isnan(want):
        return math.isnan(value)
    return struct.pack("<d", value) == struct.pack("<d", want)


def test_random_bit_patterns_of_both_float_widths_read_as_msgpack_reads_them():
    rng = random.Random(3)
    patterns = [rng.getrandbits(64) for _ in range(20_000)]
    patterns += [0, 1 << 63, 1, 0x000FFFFFFFFFFFFF, 0x7FF0000000000000, 0xFFF0000000000000]
    for bits in patterns:
        raw = b"\xcb" + bits.to_bytes(8, "big")
        value, integer, after = read(raw)
        assert after == 9 and not integer
        assert same(value, msgpack.unpackb(raw)), hex(bits)
    singles = [rng.getrandbits(32) for _ in range(20_000)] + [0, 1 << 31, 1, 0x007FFFFF, 0x7F800000]
    for bits in singles:
        raw = b"\xca" + bits.to_bytes(4, "big")
        value, integer, after = read(raw)
        assert after == 5 and not integer
        assert same(value, msgpack.unpackb(raw)), hex(bits)


def test_every_integer_width_at_its_edges_and_past_two_to_the_53():
    rng = random.Random(4)
    values = [0, 1, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, MAX_EXACT - 1, MAX_EXACT]
    values += [-1, -32, -33, -128, -129, -32768, -32769, -(2**31), -(2**31) - 1, -MAX_EXACT]
    values += [rng.randint(-MAX_EXACT, MAX_EXACT) for _ in range(20_000)]
    for v in values:
        raw = msgpack.packb(v)
        value, integer, after = read(raw)
        assert integer and after == len(raw), v
        assert value == float(v) and same(value, float(msgpack.unpackb(raw))), v
    # Every wide form explicitly, not only the one msgpack's writer picks.
    for head, width, v in ((0xCC, 1, 200), (0xCD, 2, 40_000), (0xCE, 4, 2**31), (0xCF, 8, 2**40)):
        value, integer, after = read(bytes([head]) + v.to_bytes(width, "big"))
        assert (value, integer, after) == (float(v), True, 1 + width)
    signed = ((0xD0, 1, -100), (0xD1, 2, -30_000), (0xD2, 4, -(2**30)), (0xD3, 8, -(2**50)))
    for head, width, v in signed:
        value, integer, after = read(bytes([head]) + v.to_bytes(width, "big", signed=True))
        assert (value, integer, after) == (float(v), True, 1 + width)
    # Past 2^53 (either sign, any width that holds it): refused, never rounded.
    for v in (MAX_EXACT + 1, 2**63 - 1, 2**64 - 1, -MAX_EXACT - 1, -(2**63)):
        assert read(msgpack.packb(v))[2] == -1, v


def test_what_is_not_a_number_or_is_cut_short_is_refused():
    for raw in (b"", b"\xc0", b"\xc2", b"\xc3", b"\xa1a", b"\xc4\x01\x00", b"\xcb\x00\x00",
                b"\xca\x00", b"\xcd\x01", b"\xd3\x00\x00\x00", b"\x90", b"\x80"):  # fmt: skip
        assert read(raw)[2] == -1, raw
