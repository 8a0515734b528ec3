"""Busy arithmetic, the online-first gate, the router's choices and the autoscaling decisions:
plain Python with a fake clock, a seeded generator and literal replica views."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

from actors.scheduling import (
    BusyPolicy,
    BusyTracker,
    PriorityGate,
    ReplicaView,
    RoutingPolicy,
    desired_replicas,
    rank,
)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


# ---- Busy ---------------------------------------------------------------------------------
def test_busy_is_the_working_share_of_the_window():
    clock = Clock()
    busy = BusyTracker(window_s=10.0, clock=clock)
    clock.t = 10.0
    busy.begin()
    clock.t = 13.0
    busy.end()  # 3 s of work in the last 10 s
    clock.t = 20.0
    assert busy.busy() == pytest.approx(0.3)
    clock.t = 25.0  # the window slid past half of it? no: (13 - 15) -> 0 of it left
    assert busy.busy() == pytest.approx(0.0)


def test_overlapping_calls_count_once_and_an_open_call_counts_so_far():
    clock = Clock()
    busy = BusyTracker(window_s=10.0, clock=clock)
    clock.t = 10.0
    busy.begin()
    clock.t = 12.0
    busy.begin()  # a second call overlaps the first
    clock.t = 14.0
    busy.end()
    clock.t = 16.0
    busy.end()  # one busy period, 10..16
    clock.t = 18.0
    busy.begin()  # still running at 20
    clock.t = 20.0
    assert busy.busy() == pytest.approx((6 + 2) / 10)
    assert busy.completed == 2


def test_a_shorter_window_sees_a_change_sooner():
    clock = Clock()
    busy = BusyTracker(window_s=10.0, clock=clock)
    clock.t = 10.0
    busy.begin()  # idle 0..10, working from 10
    clock.t = 11.0
    assert busy.busy() == pytest.approx(0.1)
    assert busy.busy(window_s=1.0) == pytest.approx(1.0)
    assert busy.busy(window_s=100.0) == pytest.approx(0.1)  # never past its own window


def test_a_young_tracker_divides_by_its_age_not_the_window():
    clock = Clock()
    busy = BusyTracker(window_s=10.0, clock=clock)
    busy.begin()
    clock.t = 2.0
    busy.end()
    clock.t = 4.0
    assert busy.busy() == pytest.approx(0.5)


def test_stuck_means_busy_with_no_completion_for_a_while():
    clock = Clock()
    busy = BusyTracker(window_s=10.0, clock=clock)
    assert not busy.stuck(5.0)
    busy.begin()
    clock.t = 3.0
    assert not busy.stuck(5.0)
    clock.t = 6.0
    assert busy.stuck(5.0)
    busy.end()
    assert not busy.stuck(5.0)


# ---- the online-first gate ----------------------------------------------------------------
def test_offline_steps_wait_while_online_work_runs():
    gate = PriorityGate()
    assert gate.yield_to_online() == 0.0
    started = threading.Event()
    waited: list[float] = []

    def offline_step() -> None:
        started.set()
        waited.append(gate.yield_to_online())

    with gate.online():
        thread = threading.Thread(target=offline_step)
        thread.start()
        started.wait()
        time.sleep(0.05)
        assert thread.is_alive()  # still waiting for the online call
    thread.join(5)
    assert waited and waited[0] >= 0.04 and gate.yields == 1


# ---- the router ---------------------------------------------------------------------------
def views(*specs) -> list[ReplicaView]:
    return [
        ReplicaView(f"r{k}", node, queue, busy, speed)
        for k, (node, queue, busy, speed) in enumerate(specs)
    ]


def test_the_local_node_wins_while_its_replicas_have_room():
    replicas = views(("a", 1, 0.3, 1.0), ("a", 0, 0.2, 1.0), ("b", 0, 0.0, 1.0))
    picks = Counter(rank(replicas, "a", 0.0, random.Random(k))[0][0].node_id for k in range(50))
    assert picks == {"a": 50}


def test_a_busy_local_node_spills_to_another():
    replicas = views(("a", 6, 1.0, 1.0), ("a", 5, 1.0, 1.0), ("b", 0, 0.1, 1.0))
    policy = RoutingPolicy(spill_threshold=3.0)
    pick = rank(replicas, "a", 0.0, random.Random(1), policy)[0][0]
    assert pick.node_id == "b"


def test_among_two_sampled_the_earliest_expected_finish_wins():
    replicas = views(("a", 4, 0.9, 1.0), ("a", 0, 0.1, 1.0))
    picks = {rank(replicas, "a", 0.0, random.Random(k))[0][0].replica_id for k in range(20)}
    assert picks == {"r1"}


def test_a_slower_replica_needs_proportionally_less_queue_to_lose():
    fast, slow = (
        ReplicaView("f", "a", queue=2, speed=1.0),
        ReplicaView("s", "a", queue=1, speed=0.4),
    )
    assert fast.expected_finish() < slow.expected_finish()  # 3 / 1.0 < 2 / 0.4


def test_a_replica_that_just_failed_is_avoided_until_its_cooldown():
    replicas = [
        ReplicaView("bad", "a", failed_at=10.0),
        ReplicaView("good", "a", queue=3),
    ]
    policy = RoutingPolicy(failure_cooldown_s=5.0, spill_threshold=100)
    assert rank(replicas, "a", 12.0, random.Random(0), policy)[0][0].replica_id == "good"
    assert rank(replicas, "a", 20.0, random.Random(0), policy)[0][0].replica_id == "bad"


def test_every_replica_appears_once_one_per_tier():
    replicas = views(*[("a" if k % 2 else "b", k, 0.5, 1.0) for k in range(5)])
    tiers = rank(replicas, "a", 0.0, random.Random(3))
    assert all(len(t) == 1 for t in tiers)
    assert sorted(t[0].replica_id for t in tiers) == sorted(r.replica_id for r in replicas)
    assert rank([], "a", 0.0, random.Random(0)) == []


# ---- autoscaling --------------------------------------------------------------------------
POLICY = BusyPolicy(
    target_busy=0.6, band=0.1, min_replicas=1, max_replicas=8, offline_max_share=0.25
)


def want(current: int, online: float, offline: float = 0.0, policy: BusyPolicy = POLICY) -> int:
    return desired_replicas(current, online, offline, policy).replicas


def test_busy_above_the_band_scales_up_to_the_target():
    assert want(2, 0.9) == 3  # 1.8 replica-equivalents / 0.6


def test_busy_past_the_target_scales_up_at_once_but_down_only_past_the_band():
    assert want(4, 0.62) == 5  # 2.48 / 0.6
    assert want(8, 0.52) == 8  # 7 would do, but 0.52 is inside the band
    assert want(8, 0.45) == 6  # 3.6 / 0.6


def test_busy_below_the_band_scales_down_to_the_target():
    assert want(4, 0.2) == 2  # 0.8 / 0.6


def test_saturated_replicas_double_since_busy_cannot_say_how_far_past_capacity():
    assert want(3, 0.97) == 6  # 2.9 / 0.6 alone would say 5
    assert want(3, 0.0, 1.0) == 3  # offline saturation alone does not double


def test_a_queue_is_saturation_before_busy_shows_it():
    assert desired_replicas(2, 0.75, 0.0, POLICY, requests=2.5).replicas == 3  # no queue
    assert desired_replicas(2, 0.75, 0.0, POLICY, requests=5).replicas == 4  # doubles
    # a deep queue: 14 requests / 1.5 per replica = 10 (capped at 8)
    assert desired_replicas(2, 0.75, 0.0, POLICY, requests=14).replicas == 8
    assert desired_replicas(4, 0.75, 0.0, POLICY, requests=14).replicas == 8


def test_an_offline_backlog_is_not_online_pressure():
    # 20 requests, but 90% of the work is offline: 2 online requests, no saturation; offline
    # demand adds its share (1 + 2) and no more
    assert desired_replicas(2, 0.1, 0.9, POLICY, requests=20).replicas == 3


def test_offline_demand_alone_adds_at_most_its_share():
    # 1 replica fully busy offline: wants 2; allowed min + 25% of 8 = 3
    assert want(1, 0.0, 1.0) == 2
    # 4 replicas fully busy offline: wants 7, capped at 1 + 2 = 3: it does not grow (and,
    # busy, does not shrink either)
    assert want(4, 0.0, 1.0) == 4


def test_online_demand_is_never_cut_for_offline():
    assert want(4, 0.95, 0.05) == 8  # saturated online: doubled; offline adds nothing past it
    assert want(4, 0.8, 0.2) == 7  # online needs 6; offline adds 1, within its room of 2


def test_bounds_and_bad_policies():
    assert want(8, 1.0) == 8
    assert want(0, 0.0) == 1
    with pytest.raises(ValueError):
        BusyPolicy(target_busy=1.2)


def test_busy_running_total_matches_the_sum_of_periods() -> None:
    """The O(1) full-window query (a running total) says what summing the periods says."""
    rng = random.Random(7)
    now = [0.0]
    tracker = BusyTracker(window_s=5.0, clock=lambda: now[0])
    periods: list[tuple[float, float]] = []
    for _ in range(400):
        now[0] += rng.expovariate(20)
        start = now[0]
        tracker.begin()
        now[0] += rng.expovariate(30)
        tracker.end()
        periods.append((start, now[0]))
        now[0] += rng.random() * 0.02
        for window in (5.0, 1.3):
            lo = max(now[0] - window, 0.0)
            want = sum(min(e, now[0]) - max(s, lo) for s, e in periods if e > lo)
            assert tracker.busy(window) == pytest.approx(want / (now[0] - lo), abs=1e-9)
