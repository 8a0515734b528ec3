"""Compiled helpers of the round readers: many spans of a buffer joined into one, so that
their strings decode in one call (``round_columns``), and a span compared with a word."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def joined(buf, spans, sep):
    """(the strings at ``spans`` (int64[N, 2]) as one uint8 array, ``sep`` between them,
    False where a string holds ``sep`` itself: then they cannot be split apart again)."""
    n = spans.shape[0]
    total = max(n - 1, 0)
    for k in range(n):
        total += spans[k, 1] - spans[k, 0]
    out = np.empty(total, np.uint8)
    at = 0
    for k in range(n):
        if k:
            out[at] = sep
            at += 1
        for j in range(spans[k, 0], spans[k, 1]):
            byte = buf[j]
            if byte == sep:
                return out, False
            out[at] = byte
            at += 1
    return out, True


@njit(cache=True, nogil=True)
def span_is(buf, start, stop, word):
    """Whether ``buf[start:stop]`` holds the bytes of ``word`` (uint8[K])."""
    if stop - start != len(word):
        return False
    for k in range(len(word)):  # noqa: SIM110 (compiled: a loop, not a generator)
        if buf[start + k] != word[k]:
            return False
    return True
