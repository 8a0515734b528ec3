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


def _layout(arrays: Sequence[Any]) -> tuple[list[int], list[int], int]:
    """Where each array lies in one byte buffer: the arrays in the order they are laid (the
    widest items first, so that every array starts at a multiple of its own item size with no
    padding), each one's byte offset (by the arrays' own order), and the buffer's size."""
    order = sorted(range(len(arrays)), key=lambda i: -arrays[i].dtype.itemsize)
    offsets, at = [0] * len(arrays), 0
    for i in order:
        offsets[i] = at
        at += int(arrays[i].nbytes)
    return order, offsets, at


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
    order, offsets, size = _layout(host)
    staged = np.empty(size, np.uint8)
    for i in order:
        a, at = host[i], offsets[i]
        staged[at : at + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    return _views(xp.asarray(staged), host, offsets)


def to_host(arrays: Sequence[Any], xp: ModuleType) -> list[np.ndarray]:
    """Device ``arrays`` (of ``xp``) on the host, copied in one transfer: their bytes gathered
    by one concatenation on the device, read back once, each a view of that host copy. On
    NumPy: the arrays themselves."""
    if xp is np or not arrays:
        return list(arrays)
    order, offsets, _ = _layout(arrays)
    raw = [xp.ascontiguousarray(arrays[i]).reshape(-1).view(xp.uint8) for i in order]
    return _views(xp.concatenate(raw).get(), arrays, offsets)
