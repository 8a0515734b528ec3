"""A queue of row-batched requests with traffic classes, for a model that runs batches.

Each request brings ``rows`` rows. ``next_batch(max_rows)`` fills one batch: online requests
first, oldest first, then offline ones in the room left (at most ``max_offline_rows`` of them:
a call's time grows with its rows, and online rows arriving during a long offline-filled call
wait for all of it); a request larger than the room is
split, its first rows in this batch and the rest in the next (so a legal request is never
refused for being bigger than a batch). An offline request that has waited ``offline_aging_s``
is served as online, so a steady online load cannot starve it forever.

A request whose deadline passes while it waits is dropped before any of its rows run (the
caller has given up; computing it would only delay the others) and reported by ``next_batch``.
Requests can be withdrawn (``remove``) when their caller is cancelled.

``OfflinePacing`` says how much offline work a call may carry while online traffic flows and
how long offline-only work should hold back (the ETR batcher's rule, run by the fleet simulator
too).

Pure logic: times come from the caller (seconds on any monotonic clock), nothing here sleeps.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from domain import TrafficClass


@dataclass(frozen=True)
class Slice:
    """Rows ``start:stop`` of request ``key`` go into the batch, in this order."""

    key: int
    start: int
    stop: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


@dataclass
class _Waiting:
    key: int
    rows: int
    traffic_class: TrafficClass
    enqueued_at: float
    deadline: float
    taken: int = 0  # rows already placed in a batch
    # An aged offline request's place among online ones: when it aged, then when the batch
    # after the one it last rode in was made (nan: it rode in the last one, set at the next)
    turn: float = -math.inf


@dataclass
class Batch:
    """What ``next_batch`` hands out: the slices to run and the requests it dropped."""

    slices: list[Slice] = field(default_factory=list)
    expired: list[int] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.slices)


class BatchQueue:
    """offline_aging_s : an offline request waiting this long is served as online (seconds;
    ``inf`` never)."""

    def __init__(self, offline_aging_s: float = float("inf")) -> None:
        if offline_aging_s <= 0:
            raise ValueError(f"offline_aging_s must be > 0, got {offline_aging_s}")
        self.offline_aging_s = offline_aging_s
        self._waiting: dict[int, _Waiting] = {}  # insertion order = arrival order
        self._keys = itertools.count()

    def put(
        self,
        rows: int,
        traffic_class: TrafficClass,
        now: float,
        deadline: float = float("inf"),
    ) -> int:
        """Queue a request of ``rows`` rows (>= 1); returns its key."""
        if rows < 1:
            raise ValueError(f"a request needs at least one row, got {rows}")
        key = next(self._keys)
        self._waiting[key] = _Waiting(key, rows, TrafficClass(traffic_class), now, deadline)
        return key

    def remove(self, key: int) -> None:
        """Withdraw a request (its caller went away); rows already handed out still run."""
        self._waiting.pop(key, None)

    def __len__(self) -> int:
        return len(self._waiting)

    def rows_waiting(self, traffic_class: TrafficClass | None = None) -> int:
        """Rows not yet handed out, of one class or all."""
        return sum(
            w.rows - w.taken
            for w in self._waiting.values()
            if traffic_class is None or w.traffic_class is traffic_class
        )

    def oldest_enqueued_at(self) -> float:
        """When the longest-waiting request was queued (``inf`` when none waits)."""
        return next((w.enqueued_at for w in self._waiting.values()), math.inf)

    def has_online(self, now: float) -> bool:
        """Whether any waiting request is served as online now (online, or offline aged)."""
        return any(self._rank(w, now) == TrafficClass.ONLINE.rank for w in self._waiting.values())

    def next_batch(self, max_rows: int, now: float, max_offline_rows: int | None = None) -> Batch:
        """Up to ``max_rows`` rows: online (and aged offline) requests first, oldest first,
        then offline in the room left, at most ``max_offline_rows`` of them (None: no cap).
        Requests past their deadline that have not started are dropped and listed in
        ``expired``."""
        if max_rows < 1:
            raise ValueError(f"max_rows must be >= 1, got {max_rows}")
        batch = Batch()
        for w in list(self._waiting.values()):
            if w.taken == 0 and now >= w.deadline:
                del self._waiting[w.key]
                batch.expired.append(w.key)
        for w in self._waiting.values():
            if math.isnan(w.turn):
                w.turn = now
        room = max_rows
        offline_room = max_rows if max_offline_rows is None else max_offline_rows
        for w in sorted(self._waiting.values(), key=lambda w: self._order(w, now)):
            if room == 0:
                break
            rank = self._rank(w, now)
            offline = rank == TrafficClass.OFFLINE.rank
            n = min(room, w.rows - w.taken, offline_room if offline else room)
            if n == 0:
                break  # offline requests sort last: none of the rest fits either
            if offline:
                offline_room -= n
            batch.slices.append(Slice(w.key, w.taken, w.taken + n))
            w.taken += n
            room -= n
            if w.taken == w.rows:
                del self._waiting[w.key]
            elif rank != w.traffic_class.rank:  # aged: yields its next turn
                w.turn = math.nan
        return batch

    def _order(self, w: _Waiting, now: float) -> tuple[int, float, bool, int]:
        """Sort key: class rank; within online, arrival (an aged offline request: its turn,
        after online requests of the same instant); then arrival order."""
        rank = self._rank(w, now)
        if rank != w.traffic_class.rank:
            return rank, max(w.turn, w.enqueued_at + self.offline_aging_s), True, w.key
        return rank, w.enqueued_at, False, w.key

    def _rank(self, w: _Waiting, now: float) -> int:
        if w.traffic_class is TrafficClass.OFFLINE and now - w.enqueued_at >= self.offline_aging_s:
            return TrafficClass.ONLINE.rank
        return w.traffic_class.rank


@dataclass
class OfflinePacing:
    """Offline rows beside online traffic. A call is not preempted and its time grows with its
    rows, so while online requests keep arriving (one in the last ``online_recent_s``
    seconds) offline rows ride along in calls made for online rows, at most
    ``rows_while_online`` per call, and offline-only calls wait until online traffic pauses,
    unless such a call is short: one expected to take at most ``short_call_s`` runs at once
    (an online request arriving meanwhile waits that long at most; holding it would leave
    the device idle beside steady online traffic and starve the offline work until it ages).
    With no online traffic, offline batches fill the whole call."""

    rows_while_online: int
    online_recent_s: float = 1.0
    short_call_s: float = 0.0  # 0: offline-only calls always wait for a pause
    online_at: float = -math.inf  # when the last online request arrived

    def saw_online(self, now: float) -> None:
        self.online_at = now

    def offline_cap(self, now: float, max_rows: int) -> int:
        """Offline rows one call of at most ``max_rows`` rows may carry now."""
        if now - self.online_at >= self.online_recent_s:
            return max_rows
        return min(self.rows_while_online, max_rows)

    def hold_s(self, queue: BatchQueue, now: float, call_s: float = math.inf) -> float:
        """How long a call with only offline rows in ``queue`` should wait now (0: run).
        call_s : the expected time of an offline-only call of ``rows_while_online`` rows on
        this device (seconds; inf when unknown: hold)."""
        if queue.has_online(now) or call_s <= self.short_call_s:
            return 0.0
        return max(0.0, self.online_at + self.online_recent_s - now)
