"""Values round-trip without pickle; keys are canonical, quantised and versioned."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from cache.codec import CacheDecodeError, decode, encode
from cache.keys import Quantisation, cache_key


def test_values_round_trip_with_arrays():
    value = {
        "minutes": np.arange(6, dtype=np.float32).reshape(2, 3),
        "n": 3,
        "ok": True,
        "ids": ["a", "b"],
        "blob": b"\x00\x01",
        "none": None,
        "x": 1.5,
    }
    got = decode(encode(value))
    assert got["minutes"].dtype == np.float32 and got["minutes"].shape == (2, 3)
    np.testing.assert_array_equal(got["minutes"], value["minutes"])
    assert {k: v for k, v in got.items() if k != "minutes"} == {
        k: v for k, v in value.items() if k != "minutes"
    }


@pytest.mark.parametrize("garbage", [b"", b"hello", b"OC\x01\xc1\xc1", b"OC\x01" + b"\xff" * 9])
def test_garbage_is_a_decode_error(garbage):
    with pytest.raises(CacheDecodeError):
        decode(garbage)


def test_pickle_bytes_are_never_executed(tmp_path):
    marker = tmp_path / "pwned"

    class Boom:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    payload = pickle.dumps(Boom())
    for data in (payload, b"OC\x01" + payload):
        with pytest.raises(CacheDecodeError):
            decode(data)
    assert not marker.exists()


def test_object_arrays_are_refused():
    with pytest.raises(TypeError, match="dtype object"):
        encode(np.array([object()], dtype=object))


def test_equal_requests_share_a_key_and_versions_do_not():
    a = {"lat": 31.2304001, "lng": 121.4737, "created_at": 100.2, "items": [1, 2]}
    b = {"items": [1, 2], "created_at": 100.4, "lng": 121.4737002, "lat": 31.2304}
    assert cache_key("etr", "1", a) == cache_key("etr", "1", b)
    assert cache_key("etr", "1", a) != cache_key("etr", "2", a)
    assert cache_key("etr", "1", a) != cache_key("etr", "1", {**a, "lat": 31.2310})
    assert (
        cache_key("etr", "1", a).startswith("orml:etr:1:") and len(cache_key("etr", "1", a)) == 43
    )
    coarse = Quantisation(coord_deg=1e-2)
    assert cache_key("etr", "1", a, coarse) == cache_key("etr", "1", {**a, "lat": 31.231}, coarse)


def test_arrays_quantise_too():
    x = np.array([[1.0, 2.0]], np.float32)
    assert cache_key("etr", "1", x) == cache_key("etr", "1", x + np.float32(1e-8))
    assert cache_key("etr", "1", x) != cache_key("etr", "1", x + np.float32(1e-3))


def test_bad_namespace_is_refused():
    with pytest.raises(ValueError, match="namespace"):
        cache_key("a:b", "1", {})
