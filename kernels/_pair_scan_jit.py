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


def below_threshold(bound, u, v, abs_tol, rel_tol, cap):  # pragma: no cover - compiled
    """(rows, cols) int64 of every pair with ``bound[r, c] - tol < u[c] + v[r]``, where
    ``tol = abs_tol + rel_tol * |bound|``: a bound within rounding of the threshold counts as
    below it. Rows in order, columns in order within a row. Past ``cap`` pairs: empty arrays
    and the count, for the caller to take each column's least instead
    (``smallest_per_column``). Returns (rows, cols, count).

    Each row is counted first (a branch-free loop the compiler vectorises), then only the rows
    that have pairs are read again to write them, each until it has written its count: the
    writing loop cannot be vectorised, and on a dispatch round most rows have no pair below
    the duals after the first solve (a 5000 x 2000 pass: 0 to 3,400 rows of 5,000)."""
    n_rows, n_cols = bound.shape
    per_row = np.zeros(n_rows, np.int64)
    for r in prange(n_rows):
        vr = v[r]
        m = 0
        for c in range(n_cols):
            b = np.float64(bound[r, c])
            m += b - (abs_tol + rel_tol * abs(b)) < u[c] + vr
        per_row[r] = m
    start = np.zeros(n_rows + 1, np.int64)
    for r in range(n_rows):
        start[r + 1] = start[r] + per_row[r]
    count = start[n_rows]
    if count > cap:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), count
    rows = np.empty(count, np.int64)
    cols = np.empty(count, np.int64)
    for r in prange(n_rows):
        m = start[r]
        end = start[r + 1]
        vr = v[r]
        c = 0
        while m < end and c < n_cols:  # the same test as the count: it ends at ``end``
            b = np.float64(bound[r, c])
            if b - (abs_tol + rel_tol * abs(b)) < u[c] + vr:
                rows[m] = r
                cols[m] = c
                m += 1
            c += 1
    return rows, cols, count


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
        below(bound, np.zeros(2), np.zeros(2), 1e-3, 1e-6, 0)
    least_per_group(np.zeros(2, np.int64), np.zeros(2), 1, 1)
