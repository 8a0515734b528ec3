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
