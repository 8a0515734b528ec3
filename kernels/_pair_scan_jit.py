"""Compiled scans of a [R, O] bound matrix for ``certified_assign``: the least bounds per order,
and the pairs whose bound falls below the duals' threshold. Both read the matrix in its row
order (a row per rider) and run on the CPU threads (serially below ``PARALLEL_MIN_WORK``)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from kernels._jit_builds import serial_and_parallel
from kernels._sparse_assign_jit import group_order

_BLOCK = 256  # orders per task of the per-order scan: a row's block stays in one cache line run


def smallest_per_column(bound, k, u, v, abs_tol, rel_tol):  # pragma: no cover - compiled
    """(rows, cols) int64: for every column the k rows of least finite bound (fewer if fewer
    are finite), column by column; with u, v non-empty only among the pairs below the
    threshold of ``below_threshold``."""
    n_rows, n_cols = bound.shape
    k = min(k, n_rows)
    best_v = np.full((n_cols, max(k, 1)), np.inf, np.float32)
    best_r = np.full((n_cols, max(k, 1)), -1, np.int64)
    n_blocks = (n_cols + _BLOCK - 1) // _BLOCK
    limited = u.shape[0] > 0
    for b in prange(n_blocks):
        lo = b * _BLOCK
        hi = min(lo + _BLOCK, n_cols)
        for r in range(n_rows):
            for c in range(lo, hi):
                x = bound[r, c]
                if k == 0 or not x < best_v[c, k - 1]:
                    continue
                if limited:
                    b64 = np.float64(x)
                    if not b64 - (abs_tol + rel_tol * abs(b64)) < u[c] + v[r]:
                        continue
                q = k - 1
                while q > 0 and best_v[c, q - 1] > x:
                    best_v[c, q] = best_v[c, q - 1]
                    best_r[c, q] = best_r[c, q - 1]
                    q -= 1
                best_v[c, q] = x
                best_r[c, q] = r
    count = 0
    for c in range(n_cols):
        for q in range(k):
            if best_r[c, q] >= 0:
                count += 1
    rows = np.empty(count, np.int64)
    cols = np.empty(count, np.int64)
    m = 0
    for c in range(n_cols):
        for q in range(k):
            if best_r[c, q] >= 0:
                rows[m] = best_r[c, q]
                cols[m] = c
                m += 1
    return rows, cols


def below_threshold(bound, u, v, abs_tol, rel_tol, n_chunks, cap):  # pragma: no cover - compiled
    """(rows, cols) int64 of every pair with ``bound[r, c] - tol < u[c] + v[r]``, where
    ``tol = abs_tol + rel_tol * |bound|``: a bound within rounding of the threshold counts as
    below it. Rows in order, columns in order within a row; n_chunks : row blocks (tasks).
    Past ``cap`` pairs: empty arrays and the count, for the caller to take each
    column's least instead (``smallest_per_column``). Returns (rows, cols, count)."""
    n_rows, n_cols = bound.shape
    n_chunks = max(1, min(n_rows, n_chunks))
    counts = np.zeros(n_chunks + 1, np.int64)
    for t in prange(n_chunks):
        lo = t * n_rows // n_chunks
        hi = (t + 1) * n_rows // n_chunks
        m = 0
        for r in range(lo, hi):
            vr = v[r]
            for c in range(n_cols):
                b = np.float64(bound[r, c])
                if b - (abs_tol + rel_tol * abs(b)) < u[c] + vr:
                    m += 1
        counts[t + 1] = m
    for t in range(n_chunks):
        counts[t + 1] += counts[t]
    if counts[n_chunks] > cap:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), counts[n_chunks]
    rows = np.empty(counts[n_chunks], np.int64)
    cols = np.empty(counts[n_chunks], np.int64)
    for t in prange(n_chunks):
        lo = t * n_rows // n_chunks
        hi = (t + 1) * n_rows // n_chunks
        m = counts[t]
        for r in range(lo, hi):
            vr = v[r]
            for c in range(n_cols):
                b = np.float64(bound[r, c])
                if b - (abs_tol + rel_tol * abs(b)) < u[c] + vr:
                    rows[m] = r
                    cols[m] = c
                    m += 1
    return rows, cols, counts[n_chunks]


@njit(cache=True, nogil=True)
def least_per_group(group, key, k, n_groups):  # pragma: no cover - compiled
    """Indices (int64, by group) of each group's k entries of least key; ties at the k-th
    key may add a few more."""
    n = group.shape[0]
    ptr, by = group_order(group, n_groups)
    keep = np.zeros(n, np.bool_)
    for g in range(n_groups):
        lo, hi = ptr[g], ptr[g + 1]
        if hi - lo <= k:
            for q in range(lo, hi):
                keep[by[q]] = True
            continue
        keys = np.empty(hi - lo)
        for q in range(lo, hi):
            keys[q - lo] = key[by[q]]
        kth = np.partition(keys, k - 1)[k - 1]
        for q in range(lo, hi):
            if key[by[q]] <= kth:
                keep[by[q]] = True
    return np.nonzero(keep)[0]


smallest_serial, smallest_parallel = serial_and_parallel(smallest_per_column, error_model="numpy")
below_serial, below_parallel = serial_and_parallel(below_threshold, error_model="numpy")


def warm_up() -> None:
    """Compile (or load from the on-disk cache) both scans."""
    bound = np.zeros((2, 2), np.float32)
    none = np.zeros(0)
    for smallest, below in ((smallest_serial, below_serial), (smallest_parallel, below_parallel)):
        smallest(bound, 1, none, none, 1e-3, 1e-6)
        smallest(bound, 1, np.zeros(2), np.zeros(2), 1e-3, 1e-6)
        below(bound, np.zeros(2), np.zeros(2), 1e-3, 1e-6, 2, 0)
    least_per_group(np.zeros(2, np.int64), np.zeros(2), 1, 1)
