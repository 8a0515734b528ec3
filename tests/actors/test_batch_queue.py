"""The classed batch queue: online first, offline in the room left, oversize requests split,
expired requests dropped, aging, withdrawal. Plain Python, a literal clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.scheduling import BatchQueue, OfflinePacing, Slice
from domain import TrafficClass

ON, OFF = TrafficClass.ONLINE, TrafficClass.OFFLINE


def test_online_rows_go_first_and_offline_fills_the_room_left():
    q = BatchQueue()
    off = q.put(5, OFF, now=0.0)
    on = q.put(3, ON, now=1.0)
    batch = q.next_batch(6, now=2.0)
    assert batch.slices == [Slice(on, 0, 3), Slice(off, 0, 3)]
    assert q.next_batch(6, now=2.0).slices == [Slice(off, 3, 5)]
    assert len(q) == 0


def test_a_request_bigger_than_a_batch_is_split_in_order_never_refused():
    q = BatchQueue()
    big = q.put(1000, ON, now=0.0)
    got = []
    while len(q):
        got += q.next_batch(256, now=0.0).slices
    bounds = [(0, 256), (256, 512), (512, 768), (768, 1000)]
    assert got == [Slice(big, a, b) for a, b in bounds]


def test_within_a_class_the_oldest_goes_first():
    q = BatchQueue()
    a, b, c = (q.put(2, ON, now=float(k)) for k in range(3))
    assert [s.key for s in q.next_batch(5, now=3.0).slices] == [a, b, c]


def test_a_request_past_its_deadline_is_dropped_before_it_runs():
    q = BatchQueue()
    late = q.put(4, ON, now=0.0, deadline=1.0)
    fine = q.put(4, ON, now=0.0, deadline=10.0)
    batch = q.next_batch(8, now=2.0)
    assert batch.expired == [late]
    assert batch.slices == [Slice(fine, 0, 4)]


def test_a_started_request_is_finished_even_after_its_deadline():
    q = BatchQueue()
    key = q.put(10, ON, now=0.0, deadline=1.0)
    assert q.next_batch(4, now=0.5).slices == [Slice(key, 0, 4)]
    batch = q.next_batch(100, now=5.0)
    assert batch.expired == [] and batch.slices == [Slice(key, 4, 10)]


def test_offline_waiting_past_its_aging_is_served_as_online():
    q = BatchQueue(offline_aging_s=5.0)
    old = q.put(2, OFF, now=0.0)
    new = q.put(2, ON, now=6.0)
    assert [s.key for s in q.next_batch(2, now=6.0).slices] == [old]
    assert [s.key for s in q.next_batch(2, now=6.0).slices] == [new]


def test_aged_offline_work_takes_turns_with_online_instead_of_running_whole_first():
    q = BatchQueue(offline_aging_s=5.0)
    bulk = q.put(6, OFF, now=0.0)  # aged at 5.0: three batches of 2 rows
    early = q.put(2, ON, now=4.0)  # came before the bulk aged: goes first
    assert [s.key for s in q.next_batch(2, now=6.0).slices] == [early]
    assert q.next_batch(2, now=6.0).slices == [Slice(bulk, 0, 2)]
    fresh = q.put(2, ON, now=6.5)  # came after the bulk's turn: goes before its next batch
    assert [s.key for s in q.next_batch(2, now=7.0).slices] == [fresh]
    assert q.next_batch(2, now=7.0).slices == [Slice(bulk, 2, 4)]
    later = q.put(2, ON, now=8.0)
    assert [s.key for s in q.next_batch(2, now=8.0).slices] == [later]
    assert q.next_batch(2, now=8.0).slices == [Slice(bulk, 4, 6)]


def test_offline_only_calls_wait_for_a_pause_in_online_traffic_unless_they_are_short():
    q = BatchQueue()
    q.put(500, OFF, now=0.0)
    pacing = OfflinePacing(rows_while_online=64, short_call_s=0.025)
    pacing.saw_online(10.0)
    # Online traffic flowing: a long (or unknown) offline-only call waits out the second...
    assert pacing.hold_s(q, now=10.2) == pytest.approx(0.8)
    assert pacing.hold_s(q, now=10.2, call_s=0.040) == pytest.approx(0.8)
    # ...a short one runs now, capped at rows_while_online rows.
    assert pacing.hold_s(q, now=10.2, call_s=0.010) == 0.0
    assert pacing.offline_cap(now=10.2, max_rows=256) == 64
    # Online traffic paused: offline fills the call.
    assert pacing.hold_s(q, now=11.5) == 0.0
    assert pacing.offline_cap(now=11.5, max_rows=256) == 256
    # short_call_s 0 (the default): always wait for the pause.
    assert OfflinePacing(rows_while_online=64, online_at=10.0).hold_s(q, 10.2, 0.001) > 0


def test_a_withdrawn_request_never_runs():
    q = BatchQueue()
    gone = q.put(3, ON, now=0.0)
    kept = q.put(3, ON, now=0.0)
    q.remove(gone)
    assert q.next_batch(10, now=0.0).slices == [Slice(kept, 0, 3)]


def test_bad_arguments_are_refused():
    q = BatchQueue()
    with pytest.raises(ValueError, match="at least one row"):
        q.put(0, ON, now=0.0)
    with pytest.raises(ValueError, match="max_rows"):
        q.next_batch(0, now=0.0)
    with pytest.raises(ValueError, match="offline_aging_s"):
        BatchQueue(offline_aging_s=0)


@given(
    requests=st.lists(st.tuples(st.integers(1, 50), st.booleans()), min_size=1, max_size=20),
    max_rows=st.integers(1, 64),
)
def test_every_row_runs_once_online_first_and_no_batch_is_over_the_limit(requests, max_rows):
    q = BatchQueue()
    classes = {q.put(n, ON if online else OFF, now=0.0): (n, online) for n, online in requests}
    sizes = {k: n for k, (n, _) in classes.items()}
    seen: dict[int, list[tuple[int, int]]] = {k: [] for k in sizes}
    while len(q):
        online_waiting = q.rows_waiting(ON)
        batch = q.next_batch(max_rows, now=0.0)
        assert 0 < batch.rows <= max_rows
        online_rows = sum(s.rows for s in batch.slices if classes[s.key][1])
        assert online_rows == min(online_waiting, max_rows)  # online first, as much as fits
        for s in batch.slices:
            seen[s.key].append((s.start, s.stop))
    for key, parts in seen.items():
        starts = [a for a, _ in parts]
        assert starts == sorted(starts)
        assert sum(b - a for a, b in parts) == sizes[key]
        assert parts[0][0] == 0 and parts[-1][1] == sizes[key]


def test_offline_rows_of_a_batch_can_be_capped_while_online_waits_first():
    q = BatchQueue()
    off = q.put(200, TrafficClass.OFFLINE, now=0.0)
    on = q.put(10, TrafficClass.ONLINE, now=1.0)
    batch = q.next_batch(256, now=2.0, max_offline_rows=32)
    assert batch.slices == [Slice(on, 0, 10), Slice(off, 0, 32)]  # 42 rows, not 210
    assert q.next_batch(256, now=2.0, max_offline_rows=32).slices == [Slice(off, 32, 64)]
    assert q.next_batch(256, now=2.0).slices == [Slice(off, 64, 200)]  # uncapped: the rest
