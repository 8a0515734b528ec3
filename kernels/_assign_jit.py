"""The compiled twin of ``assign.shortest_augmenting_path``: the same steps as a loop, by Numba.

The NumPy build does each Dijkstra step as a handful of array calls over all columns, each
paying the interpreter's overhead, so it trails SciPy's C++ on dispatch-sized matrices; this
loop does a step in one pass and keeps up with SciPy (``bench/assign.py``). It makes the same
choices in the same float64 arithmetic (no fast-math; ``(cost + h) - v`` in both), which is why
``tests/kernels/test_assign.py`` can hold the two equal. The first call compiles (seconds;
cached on disk after).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def augment_back(pred, row4col, col4row, j, start):  # pragma: no cover - compiled
    """Flip the matching along the shortest path found, from its free column ``j`` back to
    the row ``start`` it grew from (``pred``: the row each column was reached from; -2 - k
    for a column reached by a jump from the sparse search's free pool at column k: the pool
    takes it, and column k the path's row)."""
    while True:
        i = pred[j]
        if i <= -2:
            row4col[j] = -1
            j = -2 - i
            continue
        row4col[j] = i
        nxt = col4row[i]
        col4row[i] = j
        j = nxt
        if i == start:
            break


@njit(cache=True, nogil=True, error_model="numpy")
def shortest_augmenting_path_jit(cost):  # pragma: no cover - compiled
    """cost float64[N, M], N <= M, finite, C-contiguous -> int64[N], the column of each row."""
    n_rows, n_cols = cost.shape
    u = np.zeros(n_rows)
    v = np.zeros(n_cols)
    col4row = np.full(n_rows, -1, np.int64)
    row4col = np.full(n_cols, -1, np.int64)
    final = np.empty(n_cols)
    open_cost = np.empty(n_cols)
    path = np.empty(n_cols, np.int64)
    visited = np.empty(n_cols, np.bool_)
    rows = np.empty(n_rows, np.int64)
    cols = np.empty(n_rows + 1, np.int64)
    for start in range(n_rows):
        open_cost[:] = np.inf
        path[:] = -1
        visited[:] = False
        n_seen_rows = 0
        n_seen_cols = 0
        i = start
        min_val = 0.0
        while True:
            h = min_val - u[i]
            lowest = np.inf
            j_low = -1
            low_free = False
            for j in range(n_cols):
                if visited[j]:
                    continue
                r = (cost[i, j] + h) - v[j]
                if r < open_cost[j]:
                    path[j] = i
                    open_cost[j] = r
                s = open_cost[j]
                # The first minimum, or the first free column among equal minima.
                if s < lowest or (s == lowest and not low_free and row4col[j] < 0):
                    lowest = s
                    j_low = j
                    low_free = row4col[j] < 0
            j = j_low
            min_val = lowest
            final[j] = lowest
            visited[j] = True
            cols[n_seen_cols] = j
            n_seen_cols += 1
            if row4col[j] < 0:
                break
            i = row4col[j]
            rows[n_seen_rows] = i
            n_seen_rows += 1
        u[start] += min_val
        for k in range(n_seen_rows):
            i = rows[k]
            u[i] += min_val - final[col4row[i]]
        for k in range(n_seen_cols):
            c = cols[k]
            v[c] -= min_val - final[c]
        augment_back(path, row4col, col4row, j, start)
    return col4row


def warm_up() -> None:
    """Compile (or load from the on-disk cache) the build every caller uses."""
    shortest_augmenting_path_jit(np.zeros((1, 2)))
