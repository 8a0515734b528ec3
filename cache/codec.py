"""Cache values as bytes: versioned msgpack, NumPy arrays as (dtype, shape, raw bytes).

Never pickle: bytes read from Redis are data, and a decoder that can run code would let anyone
who can write to Redis run code in every replica. Anything that does not decode cleanly (wrong
magic, truncated, an object or structured dtype, a shape that does not match the bytes) raises
``CacheDecodeError``, which callers count as a miss.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

MAGIC = b"OC\x01"  # orml cache, format version 1
_ND = 1
_ALLOWED_KINDS = frozenset("biufc")  # bool, signed, unsigned, float, complex


class CacheDecodeError(ValueError):
    """Bytes that are not a value this codec wrote."""


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind not in _ALLOWED_KINDS:
            raise TypeError(f"cannot cache arrays of dtype {obj.dtype}")
        a = np.ascontiguousarray(obj)
        return msgpack.ExtType(_ND, msgpack.packb([a.dtype.str, list(a.shape), a.tobytes()]))
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot cache values of type {type(obj).__name__}")


def _ext_hook(code: int, data: bytes) -> Any:
    if code != _ND:
        raise CacheDecodeError(f"unknown extension type {code}")
    dtype_str, shape, raw = msgpack.unpackb(data, raw=False)
    dtype = np.dtype(dtype_str)
    if dtype.kind not in _ALLOWED_KINDS:
        raise CacheDecodeError(f"refusing dtype {dtype}")
    shape = tuple(int(s) for s in shape)
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(raw):
        raise CacheDecodeError("array bytes do not match dtype and shape")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def encode(value: Any) -> bytes:
    """Bytes for ``value`` (None, bool, int, float, str, bytes, lists, str-keyed dicts, arrays).

    Raises TypeError for anything else.
    """
    return MAGIC + msgpack.packb(value, default=_default, use_bin_type=True)


def decode(data: bytes) -> Any:
    """The value ``encode`` wrote; raises CacheDecodeError for anything else."""
    if not isinstance(data, bytes | bytearray | memoryview) or bytes(data[:3]) != MAGIC:
        raise CacheDecodeError("not an orml cache value (bad magic)")
    try:
        return msgpack.unpackb(bytes(data[3:]), ext_hook=_ext_hook, raw=False, strict_map_key=True)
    except CacheDecodeError:
        raise
    except Exception as exc:
        raise CacheDecodeError(f"malformed cache value: {type(exc).__name__}: {exc}") from exc
