"""The compiled body of ``sparse_assign.sparse_assignment``: shortest augmenting paths over a
sparse bipartite graph, with the dual prices that certify the answer.

Rows are orders, columns are riders plus one private "unassigned" column per order at a high
price, so every row can always be matched. Each free row grows a Dijkstra tree over reduced
costs ``cost - u[row] - v[col]`` (kept >= 0 by the duals) with a binary heap, and stops at the
first free column it reaches; a search therefore touches the few columns near its row, not all
of them as the dense method does. Among equal distances a free column is taken first, which ends
a search at once. The duals are those of Jonker & Volgenant's method (Crouse 2016): ``v`` only
ever decreases and stays 0 on columns never reached, so it is <= 0 everywhere and 0 on every
free column, which is what makes ``(u, v)`` a certificate for pairs left out of the graph.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kernels._assign_jit import augment_back
from kernels.bare_pointer import data_pointer


@njit(cache=True, nogil=True, inline="always")
def _before(ka, ja, kb, jb):  # pragma: no cover - compiled
    # Heap order: smaller distance first; among equal ones a free column (negative tag) first.
    return ka < kb or (ka == kb and ja < jb)


@njit(cache=True, nogil=True)
def _push(keys, tags, n, key, tag):  # pragma: no cover - compiled
    k = n
    keys[k] = key
    tags[k] = tag
    while k > 0:
        p = (k - 1) >> 1
        if not _before(keys[k], tags[k], keys[p], tags[p]):
            break
        keys[p], keys[k] = keys[k], keys[p]
        tags[p], tags[k] = tags[k], tags[p]
        k = p
    return n + 1


@njit(cache=True, nogil=True)
def _pop(keys, tags, n):  # pragma: no cover - compiled
    key, tag = keys[0], tags[0]
    n -= 1
    keys[0], tags[0] = keys[n], tags[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and _before(keys[c + 1], tags[c + 1], keys[c], tags[c]):
            c += 1
        if not _before(keys[c], tags[c], keys[k], tags[k]):
            break
        keys[c], keys[k] = keys[k], keys[c]
        tags[c], tags[k] = tags[k], tags[c]
        k = c
    return key, tag, n


#: Steps of ``_row_reduction`` per row, at most: it settles most rows in one or two steps;
#: the rest (price wars among rows that want the same few columns) go to the exact search.
ROW_REDUCTION_STEPS = 4


@njit(cache=True, nogil=True, error_model="numpy")
def _row_reduction(
    row_ptr, col, cost, n_cols, unassigned_cost, u, v, col4row, row4col
):  # pragma: no cover - compiled
    """Jonker & Volgenant's augmenting row reduction, on the sparse rows: a free row takes the
    column of least ``cost - v`` and lowers that column's v by its lead over the second best
    (so the row is indifferent between the two), displacing the column's row, which tries
    again next. v only decreases and only on columns that stay matched, so free columns keep
    v = 0; each row's match is its least ``cost - v`` when taken and stays so as other
    columns' v fall, so ``u = cost - v`` on the matches is feasible. Returns the rows still
    free (their u set to their least ``cost - v``), for the exact search."""
    n_rows = row_ptr.shape[0] - 1
    head = n_rows  # rows pushed back to the front go below head
    tail = 2 * n_rows
    queue = np.empty(3 * n_rows + 1, np.int64)
    for i in range(n_rows):
        queue[n_rows + i] = i
    steps = 0
    limit = ROW_REDUCTION_STEPS * n_rows
    while head < tail and steps < limit:
        i = queue[head]
        head += 1
        steps += 1
        u1 = np.inf
        u2 = np.inf
        j1 = -1
        j2 = -1
        for e in range(row_ptr[i], row_ptr[i + 1] + 1):
            if e < row_ptr[i + 1]:
                j = col[e]
                x = cost[e] - v[j]
            else:
                j = n_cols + i
                x = unassigned_cost - v[j]
            if x < u1:
                u2, j2 = u1, j1
                u1, j1 = x, j
            elif x < u2:
                u2, j2 = x, j
        i0 = row4col[j1]
        if j2 >= 0 and u1 < u2:
            v[j1] -= u2 - u1
        elif i0 >= 0 and j2 >= 0:
            j1 = j2
            i0 = row4col[j2]
        row4col[j1] = i
        col4row[i] = j1
        if i0 >= 0:
            col4row[i0] = -1
            if j2 >= 0 and u1 < u2 and head > 0:
                head -= 1
                queue[head] = i0
            else:
                if tail == queue.shape[0]:  # compact the live part to the middle
                    n_live = tail - head
                    queue[n_rows : n_rows + n_live] = queue[head:tail].copy()
                    head, tail = n_rows, n_rows + n_live
                queue[tail] = i0
                tail += 1
    n_free = 0
    for i in range(n_rows):
        if col4row[i] < 0:
            n_free += 1
    free = np.empty(n_free, np.int64)
    n_free = 0
    for i in range(n_rows):
        j = col4row[i]
        if j >= 0:
            u[i] = _cost_of(row_ptr, col, cost, n_cols, unassigned_cost, i, j) - v[j]
            continue
        u[i] = _least_reduced(row_ptr, col, cost, n_cols, unassigned_cost, v, i)
        free[n_free] = i
        n_free += 1
    return free


@njit(cache=True, nogil=True, inline="always")
def _least_reduced(row_ptr, col, cost, n_cols, unassigned_cost, v, i):  # pragma: no cover
    """Row i's least ``cost - v`` over its pairs and its own column: the largest u that keeps
    the row's reduced costs >= 0 (a free row's feasible dual)."""
    best = unassigned_cost - v[n_cols + i]
    for e in range(row_ptr[i], row_ptr[i + 1]):
        x = cost[e] - v[col[e]]
        if x < best:
            best = x
    return best


@njit(cache=True, nogil=True, inline="always")
def _cost_of(row_ptr, col, cost, n_cols, unassigned_cost, i, j):  # pragma: no cover - compiled
    """The cost of pair (row i, column j), j one of row i's columns or its own one."""
    if j >= n_cols:
        return unassigned_cost
    for e in range(row_ptr[i], row_ptr[i + 1]):
        if col[e] == j:
            return cost[e]
    return np.inf


@njit(cache=True, nogil=True)
def _work_arrays(n_all, n_rows, n_edges):  # pragma: no cover - compiled
    """Scratch space of ``_augment`` (reset by it after each search) and the free pool's
    state, as a cold solve starts it."""
    heap = n_edges + n_rows + n_all + 1  # each pair, each own column, one jump to every column
    return (
        np.full(n_all, np.inf),  # dist
        np.full(n_all, -1, np.int64),  # pred (a jump from the free pool: -2 - the pool column)
        np.zeros(n_all, np.bool_),  # scanned
        np.empty(n_all, np.int64),  # touched
        np.empty(n_rows, np.int64),  # seen rows
        np.empty(heap),  # heap keys
        np.empty(heap, np.int64),  # heap tags
        np.array([0.0, np.inf]),  # the free pool: level, ends (see ``_augment``)
        np.zeros(n_all, np.bool_),  # deficit columns (see ``_augment``)
    )


@njit(cache=True, nogil=True, error_model="numpy")
def _augment(
    todo, row_ptr, col, cost, n_cols, unassigned_cost, u, v, col4row, row4col, work
):  # pragma: no cover - compiled
    """Match every row of ``todo`` (free, with feasible duals) by a shortest augmenting path
    each: a Dijkstra search over reduced costs that stops at the first free column that may
    end it; then the duals are updated so that reduced costs stay >= 0 and the path's pairs
    are tight.

    The work arrays carry the free pool (``_work_arrays``), updated: pool float64[2] (level,
    ends): the free columns at v = level form the free pool, and ``ends`` searches may still
    end in it (a cold solve: all of them, level 0); deficit bool[n_cols + N]: free columns
    outside the pool (an earlier answer's columns freed by ``resolve_from``, v <= level); a
    search may always end at one. With no ends left in the pool, a search that reaches it at
    distance d goes on from it to every column c at d + level - v[c], as if one of the pool's
    columns gave up its (phantom) row: this is the shortest augmenting path of the square
    problem in which one phantom row per pool column takes any column at cost 0, so the
    answer stays optimal; the pool's v all drop by the same amount (``level`` with them),
    which keeps them equal, as free columns' duals must be.
    """
    dist, pred, scanned, touched, seen_rows, heap_keys, heap_tags, pool, deficit = work
    # The heap as bare pointers: its helpers are calls, not inlined, and an array argument
    # costs each call two atomic reference counts (as much as the heap step itself).
    keys = data_pointer(heap_keys)
    tags = data_pointer(heap_tags)
    n_all = v.shape[0]
    for t in range(todo.shape[0]):
        level = pool[0]
        open_pool = pool[1] > 0  # the pool still ends searches
        start = todo[t]
        n_touched = 0
        n_heap = 0
        n_seen = 0
        i = start
        base = 0.0
        free_best = np.inf  # the nearest column touched so far that ends the search
        reached = np.inf  # distance at which the search reached the pool (no ends left)
        jumped = -1  # the pool column it went on from
        while True:
            h = base - u[i]
            last = row_ptr[i + 1]
            e = row_ptr[i]
            while e <= last:  # the row's pairs, then its own column (e == last)
                if e < last:
                    j = col[e]
                    c = cost[e]
                    e += 1
                    if c + h >= free_best:
                        # Past the nearest free column (never reached first), and so is
                        # every later pair: a row's pairs come in ascending cost.
                        e = last
                        continue
                else:
                    j = n_cols + i
                    c = unassigned_cost
                    e += 1
                if scanned[j]:
                    continue
                ends = row4col[j] < 0 and (open_pool or deficit[j])
                if row4col[j] < 0 and not ends and reached < np.inf:
                    continue  # in the pool, reached already
                r = (c + h) - v[j]
                if r < dist[j] and r < free_best:
                    if dist[j] == np.inf:
                        touched[n_touched] = j
                        n_touched += 1
                    dist[j] = r
                    pred[j] = i
                    if ends:
                        free_best = r
                    n_heap = _push(keys, tags, n_heap, r, -1 - j if ends else j)
            while True:  # the nearest column not yet scanned (stale heap entries skipped)
                key, tag, n_heap = _pop(keys, tags, n_heap)
                j = tag if tag >= 0 else -1 - tag
                if scanned[j] or key != dist[j]:
                    continue
                if row4col[j] >= 0 or open_pool or deficit[j] or reached < np.inf:
                    if row4col[j] < 0 and not (open_pool or deficit[j]):
                        continue  # in the pool, reached already
                    break
                # The pool, first reached: on to every other column through a phantom row.
                reached = key
                jumped = j
                scanned[j] = True
                for c in range(n_all):
                    if scanned[c] or (row4col[c] < 0 and not deficit[c]):
                        continue
                    r = key + (level - v[c])
                    if r < dist[c] and r < free_best:
                        if dist[c] == np.inf:
                            touched[n_touched] = c
                            n_touched += 1
                        dist[c] = r
                        pred[c] = -2 - j
                        ends = row4col[c] < 0
                        if ends:
                            free_best = r
                        n_heap = _push(keys, tags, n_heap, r, -1 - c if ends else c)
            scanned[j] = True
            base = key
            if row4col[j] < 0:
                break
            i = row4col[j]
            seen_rows[n_seen] = i
            n_seen += 1
        u[start] += base
        for k in range(n_seen):
            i = seen_rows[k]
            u[i] += base - dist[col4row[i]]
        for k in range(n_touched):
            c = touched[k]
            if scanned[c] and not (row4col[c] < 0 and not deficit[c] and c != j):
                v[c] -= base - dist[c]
        if deficit[j]:  # matched now, or the pool's (reached by a jump)
            deficit[j] = False
        elif open_pool:
            pool[1] -= 1
        augment_back(pred, row4col, col4row, j, start)
        if reached < np.inf:  # the whole pool was scanned at ``reached``: one level, exactly
            pool[0] = level - (base - reached)
            v[jumped] = pool[0]
            for c in range(n_all):
                if row4col[c] < 0 and not deficit[c]:
                    v[c] = pool[0]
        for k in range(n_touched):
            c = touched[k]
            dist[c] = np.inf
            scanned[c] = False


#: Rounds of raising warm-start columns left free (see ``sparse_shortest_paths``) before the
#: answer is called uncertified.
FIX_ROUNDS = 3


@njit(cache=True, nogil=True, error_model="numpy")
def sparse_shortest_paths(row_ptr, col, cost, n_cols, unassigned_cost, v0):  # pragma: no cover
    """Minimum-cost matching of every row (to a column or to its own unassigned column).

    row_ptr : int64[N+1], col : int64[E] (< n_cols), cost : float64[E] finite, each row's
    pairs ``col[row_ptr[i]:row_ptr[i+1]]`` in ascending cost. unassigned_cost : the price of
    row i's own column (index n_cols + i). v0 : float64[n_cols + N] column duals (<= 0) to
    start from, such as a previous solve's over fewer pairs, or empty to start from 0.
    Returns (col4row int64[N], u float64[N], v float64[n_cols + N], certified): certified is
    False when a column left free kept a negative v0, in which case the matching may not be
    optimal (solve again from 0; from 0 it is always True).

    Two savings over the textbook search, neither of which changes the optimum: most rows are
    matched first by ``_row_reduction`` (cheap auction-like steps that keep the duals feasible),
    and a row's scan stops at the first pair whose cost alone puts it past the nearest free
    column found so far (``v <= 0``, so the reduced cost is at least ``cost + h``; such a
    column would never be reached before that free one).
    """
    n_rows = row_ptr.shape[0] - 1
    n_all = n_cols + n_rows
    u = np.zeros(n_rows)
    v = v0.copy() if v0.shape[0] == n_all else np.zeros(n_all)
    col4row = np.full(n_rows, -1, np.int64)
    row4col = np.full(n_all, -1, np.int64)
    work = _work_arrays(n_all, n_rows, col.shape[0])
    todo = _row_reduction(row_ptr, col, cost, n_cols, unassigned_cost, u, v, col4row, row4col)
    # The dearest rows first: they reach far anyway, and the cheap ones after them find the
    # prices already set (a quarter less search on dispatch rounds than in index order).
    todo = todo[np.argsort(-u[todo], kind="mergesort")]
    _augment(todo, row_ptr, col, cost, n_cols, unassigned_cost, u, v, col4row, row4col, work)
    # A column left free with a negative v (one a warm start priced) breaks the certificate:
    # raise it to 0, send the rows that now prefer it back to the search, and repeat.
    col_ptr = np.zeros(0, np.int64)
    col_row = np.zeros(0, np.int64)
    col_cost = np.zeros(0)
    for _ in range(FIX_ROUNDS):
        n_bad = 0
        for j in range(n_all):
            if row4col[j] < 0 and v[j] < 0.0:
                n_bad += 1
        if n_bad == 0:
            return col4row, u, v, True
        if col_ptr.shape[0] == 0:
            col_ptr, col_row, col_cost = _by_column(row_ptr, col, cost, n_cols)
        again = np.zeros(n_rows, np.bool_)
        for i in range(n_rows):  # a row's own column: only that row can want it
            j = n_cols + i
            if row4col[j] < 0 and v[j] < 0.0:
                v[j] = 0.0
                if col4row[i] >= 0 and unassigned_cost - u[i] < 0.0:
                    row4col[col4row[i]] = -1
                    col4row[i] = -1
                    again[i] = True
        for j in range(n_cols):
            if row4col[j] >= 0 or v[j] >= 0.0:
                continue
            v[j] = 0.0
            for e in range(col_ptr[j], col_ptr[j + 1]):
                i = col_row[e]
                slack = col_cost[e] - u[i]
                if col4row[i] >= 0 and slack < -1e-9 * (1.0 + abs(col_cost[e])):
                    row4col[col4row[i]] = -1
                    col4row[i] = -1
                    again[i] = True
        todo = np.nonzero(again)[0]
        for i in todo:
            u[i] = _least_reduced(row_ptr, col, cost, n_cols, unassigned_cost, v, i)
        _augment(todo, row_ptr, col, cost, n_cols, unassigned_cost, u, v, col4row, row4col, work)
    return col4row, u, v, False


@njit(cache=True, nogil=True, error_model="numpy")
def resolve_from(
    row_ptr, col, cost, n_cols, unassigned_cost, u0, v0, col4row0, max_freed
):  # pragma: no cover - compiled
    """The optimum again, from an earlier optimum over fewer pairs (``certified_assign``'s
    solves after the first).

    row_ptr, col, cost, n_cols, unassigned_cost : as ``sparse_shortest_paths``, the pairs now.
    u0 float64[N], v0 float64[n_cols + N], col4row0 int64[N] : the earlier answer (its duals
    certify it: every free column at v = 0; a row's own column for "no rider").
    max_freed : past this many rows to search again, a cold solve is cheaper: give up.
    Returns (col4row, u, v, certified) as ``sparse_shortest_paths`` does; certified is False
    (and nothing is solved) where the earlier answer does not certify itself or more than
    ``max_freed`` rows would be searched again.

    Every row keeps its match and its dual unless one of its pairs now breaks the duals
    (reduced cost < 0) or its match is gone; those rows are set free, each with the column it
    held, and searched again. A freed column keeps its v, below the free columns' 0, which a
    free column may not: ``_augment`` then lets the searches end there first (see there).
    Where few pairs break the duals that is a few searches instead of a cold solve's
    hundreds; the answer is the cold solve's optimum (ties may pick another).
    """
    n_rows = row_ptr.shape[0] - 1
    n_all = n_cols + n_rows
    u = u0.copy()
    v = v0.copy()
    col4row = col4row0.copy()
    row4col = np.full(n_all, -1, np.int64)
    for i in range(n_rows):
        j = col4row[i]
        if j < 0 or row4col[j] >= 0:
            return col4row, u, v, False
        row4col[j] = i
    for j in range(n_all):
        if row4col[j] < 0 and v[j] != 0.0:
            return col4row, u, v, False
    freed = np.zeros(n_rows, np.bool_)
    deficit = np.zeros(n_all, np.bool_)  # the freed columns below v = 0
    ends = 0.0  # freed columns at v = 0: searches that may end in the free pool
    for i in range(n_rows):
        j = col4row[i]
        c = _cost_of(row_ptr, col, cost, n_cols, unassigned_cost, i, j)
        if c != np.inf:
            u[i] = c - v[j]  # tight on its match (the "no rider" price may have changed)
        if c == np.inf or _breaks(row_ptr, col, cost, n_cols, unassigned_cost, u, v, i):
            freed[i] = True
            if v[j] == 0.0:
                ends += 1.0
            else:
                deficit[j] = True
            row4col[j] = -1
            col4row[i] = -1
    todo = np.nonzero(freed)[0]
    if todo.shape[0] > max_freed:
        return col4row, u, v, False
    work = _work_arrays(n_all, n_rows, col.shape[0])  # only once a warm solve is certain
    pool = work[7]
    work[8][:] = deficit
    for i in todo:
        u[i] = _least_reduced(row_ptr, col, cost, n_cols, unassigned_cost, v, i)
    todo = todo[np.argsort(-u[todo], kind="mergesort")]
    pool[1] = ends
    _augment(todo, row_ptr, col, cost, n_cols, unassigned_cost, u, v, col4row, row4col, work)
    if pool[0] != 0.0:  # the free columns back at v = 0 (reduced costs unchanged)
        v -= pool[0]
        u += pool[0]
    # A kept row's reduced cost may be below 0 by the duals' rounding (``_breaks`` lets it
    # be), which can lift a column's v that much past 0.
    np.minimum(v, 0.0, v)
    return col4row, u, v, True


@njit(cache=True, nogil=True)
def _breaks(row_ptr, col, cost, n_cols, unassigned_cost, u, v, i):  # pragma: no cover
    """Whether some pair of row i (or its own column) has a negative reduced cost, beyond
    the duals' own rounding."""
    for e in range(row_ptr[i], row_ptr[i + 1]):
        if cost[e] - u[i] - v[col[e]] < -1e-9 * (1.0 + abs(cost[e])):
            return True
    return unassigned_cost - u[i] - v[n_cols + i] < -1e-9 * (1.0 + unassigned_cost)


@njit(cache=True, nogil=True)
def _by_column(row_ptr, col, cost, n_cols):  # pragma: no cover - compiled
    """The pairs as CSC: (col_ptr int64[n_cols+1], row int64[E], cost float64[E])."""
    n_rows = row_ptr.shape[0] - 1
    col_ptr = np.zeros(n_cols + 1, np.int64)
    for e in range(col.shape[0]):
        col_ptr[col[e] + 1] += 1
    for j in range(n_cols):
        col_ptr[j + 1] += col_ptr[j]
    fill = col_ptr[:-1].copy()
    rows = np.empty(col.shape[0], np.int64)
    costs = np.empty(col.shape[0])
    for i in range(n_rows):
        for e in range(row_ptr[i], row_ptr[i + 1]):
            q = fill[col[e]]
            rows[q] = i
            costs[q] = cost[e]
            fill[col[e]] = q + 1
    return col_ptr, rows, costs


@njit(cache=True, nogil=True)
def group_order(group, n_groups):  # pragma: no cover - compiled
    """A stable counting sort by group: (ptr int64[G+1], by int64[N]) with group g's entries
    ``by[ptr[g]:ptr[g+1]]`` in their order."""
    n = group.shape[0]
    ptr = np.zeros(n_groups + 1, np.int64)
    for k in range(n):
        ptr[group[k] + 1] += 1
    for g in range(n_groups):
        ptr[g + 1] += ptr[g]
    fill = ptr[:-1].copy()
    by = np.empty(n, np.int64)
    for k in range(n):
        by[fill[group[k]]] = k
        fill[group[k]] += 1
    return ptr, by


@njit(cache=True, nogil=True)
def rows_by_cost(row, col, cost, n_rows):  # pragma: no cover - compiled
    """The pairs (row[k], col[k], cost[k]) as CSR: (row_ptr int64[N+1], col, cost), each row's
    pairs in ascending cost (a counting sort by row, then a sort within each row)."""
    row_ptr, by = group_order(row, n_rows)
    out_col = col[by]
    out_cost = cost[by]
    for i in range(n_rows):
        lo, hi = row_ptr[i], row_ptr[i + 1]
        if hi - lo > 1:
            by = np.argsort(out_cost[lo:hi], kind="mergesort")
            out_col[lo:hi] = out_col[lo:hi][by]
            out_cost[lo:hi] = out_cost[lo:hi][by]
    return row_ptr, out_col, out_cost


def warm_up() -> None:
    """Compile (or load from the on-disk cache) the build every caller uses."""
    row_ptr, col, cost = rows_by_cost(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1), 1)
    sparse_shortest_paths(row_ptr, col, cost, 1, 1.0, np.zeros(0))
    sparse_shortest_paths(row_ptr, col, cost, 1, 1.0, np.zeros(2))
    resolve_from(row_ptr, col, cost, 1, 1.0, np.zeros(1), np.zeros(2), np.ones(1, np.int64), 1)
