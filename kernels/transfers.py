"""Moving a batch of arrays between the host and a device in one copy each way.

A GPU round's input is a few dozen small arrays (a route batch, an order batch, the owners)
and its answer a dozen more: copied one by one, each is a blocking transfer of its own (tens
of microseconds each, whatever its size). Here they are laid end to end in one byte buffer,
copied once, and viewed back by dtype and shape where they land. On NumPy both ways are the
arrays themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

#: Each array starts at a multiple of this many bytes in the buffer (the widest dtype the
#: kernels read, so every view is aligned for its loads).
ALIGN = 8


def _layout(arrays: Sequence[Any]) -> tuple[list[int], int]:
    """Each array's byte offset in the buffer, and the buffer's size."""
    offsets, at = [], 0
    for a in arrays:
        offsets.append(at)
        at += -(-int(a.nbytes) // ALIGN) * ALIGN
    return offsets, at


def _views(buffer: Any, arrays: Sequence[Any], offsets: list[int]) -> list[Any]:
    return [
        buffer[at : at + int(a.nbytes)].view(a.dtype).reshape(a.shape)
        for a, at in zip(arrays, offsets, strict=True)
    ]


def to_device(arrays: Sequence[np.ndarray], xp: ModuleType) -> list[Any]:
    """The host ``arrays`` on ``xp``'s device, copied in one transfer (the same dtypes and
    shapes, each a view of one device buffer). On NumPy: the arrays themselves."""
    if xp is np or not arrays:
        return list(arrays)
    host = [np.asarray(a) for a in arrays]
    offsets, size = _layout(host)
    staged = np.empty(size, np.uint8)
    for a, at in zip(host, offsets, strict=True):
        staged[at : at + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return _views(xp.asarray(staged), host, offsets)


def to_host(arrays: Sequence[Any], xp: ModuleType) -> list[np.ndarray]:
    """Device ``arrays`` (of ``xp``) on the host, copied in one transfer: their bytes gathered
    by one concatenation on the device (the widest items first, so that every array starts
    at a multiple of its own item size with no padding), read back once, each a view of that
    host copy. On NumPy: the arrays themselves."""
    if xp is np or not arrays:
        return list(arrays)
    order = sorted(range(len(arrays)), key=lambda i: -arrays[i].dtype.itemsize)
    raw = [xp.ascontiguousarray(arrays[i]).reshape(-1).view(xp.uint8) for i in order]
    host = xp.concatenate(raw).get()
    out: list[np.ndarray] = [host] * len(arrays)
    at = 0
    for i in order:
        a = arrays[i]
        out[i] = host[at : at + int(a.nbytes)].view(a.dtype).reshape(a.shape)
        at += int(a.nbytes)
    return out
