import time

import pytest

from planner.stage_times import StageTimes


def test_a_stage_sums_its_entries_and_counts_one_that_raises():
    times = StageTimes("a", "b")
    assert times.ms == {"a": 0.0, "b": 0.0}
    for _ in range(2):
        with times("a"):
            time.sleep(0.01)
    with pytest.raises(ZeroDivisionError), times("c"):
        time.sleep(0.01)
        1 / 0  # noqa: B018
    assert times.ms["a"] >= 20.0 and times.ms["b"] == 0.0 and times.ms["c"] >= 10.0
    assert list(times.ms) == ["a", "b", "c"]


class _Event:
    """A device event whose time is the host's when recorded, counting waits."""

    waits = 0

    def record(self) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        _Event.waits += 1


def test_on_a_device_the_stages_are_timed_by_events_read_once_at_the_end():
    elapsed = []

    def between(start: _Event, end: _Event) -> float:
        elapsed.append((start, end))
        return (end.at - start.at) * 1e3

    times = StageTimes("a", "b", device=(_Event, between))
    for _ in range(2):
        with times("a"):
            time.sleep(0.01)
    with times("c"):
        time.sleep(0.01)
    assert _Event.waits == 0 and not elapsed  # nothing read while the stages run
    assert times.ms["a"] >= 20.0 and times.ms["b"] == 0.0 and times.ms["c"] >= 10.0
    assert list(times.ms) == ["a", "b", "c"]
    assert _Event.waits == 1 and len(elapsed) == 3  # one wait, for the last event
    assert times.ms["a"] >= 20.0 and _Event.waits == 1  # read once
