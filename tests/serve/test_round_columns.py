"""The column rules' strings (``serve_app.round_columns._strings``): an id's length is counted
in characters, as the model counts it, whether the ids are ASCII (counted from their byte
spans at once) or not (counted one by one after decoding), and bytes that are not UTF-8 are
refused."""

from __future__ import annotations

import numpy as np
import pytest

from domain.bounds import ID_LENGTH
from serve_app.round_columns import _strings

LO, HI = ID_LENGTH


def spans_of(ids: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """(the ids' bytes one after another, int64[N, 2] their spans)."""
    buf = np.frombuffer(b"".join(ids), np.uint8)
    ends = np.cumsum([len(i) for i in ids])
    return buf, np.stack([ends - [len(i) for i in ids], ends], axis=1).astype(np.int64)


@pytest.mark.parametrize("char", ["a", "é", "字"])
@pytest.mark.parametrize(("length", "taken"), [(LO, True), (HI, True), (HI + 1, False)])
def test_an_ids_length_is_counted_in_characters(char, length, taken):
    ids = [b"r1", (char * length).encode(), b"r2"]
    got = _strings(*spans_of(ids), ID_LENGTH)
    assert (got is not None) == taken
    if taken:
        assert got == [i.decode() for i in ids]


def test_an_empty_id_and_bytes_not_utf8_are_refused():
    assert _strings(*spans_of([b"a", b""]), ID_LENGTH) is None
    assert _strings(*spans_of([b"a", b"\xff\xfe"]), ID_LENGTH) is None


def test_ids_holding_a_nul_are_read_one_by_one():
    ids = [b"a\x00b", b"c" * HI]
    assert _strings(*spans_of(ids), ID_LENGTH) == ["a\x00b", "c" * HI]
    assert _strings(*spans_of([b"a\x00b", b"c" * (HI + 1)]), ID_LENGTH) is None
