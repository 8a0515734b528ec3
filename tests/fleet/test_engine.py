"""The fleet simulator's core against hand-computed queues, and its runs against themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from devices.catalog import gpu_types
from domain import TrafficClass
from fleet.engine import FleetSim, Policy, SimDeployment, SimFailure, SimSettings, Slot

A10 = gpu_types()["A10"]
ONLINE, OFFLINE = TrafficClass.ONLINE, TrafficClass.OFFLINE
EXACT = SimSettings(replica_start_s=0.0, jitter_sigma=0.0)
FIXED = Policy("fixed", scaler="fixed")


def one_card(batch: int = 1, slots: int = 1, nodes: int = 1, slo_s: float = 0.12):
    return [
        SimDeployment(
            "d",
            "m",
            slo_s,
            10.0,
            tuple(Slot("d", k, f"n{k % nodes}", A10, batch, 1.0) for k in range(slots)),
        )
    ]


def run(deployments, arrivals, call_ms, policy=FIXED, **kw):
    end_s = kw.pop("end_s", 1.0)
    sim = FleetSim(deployments, policy, kw.pop("settings", EXACT), call_ms, lambda g: 1.0, **kw)
    return sim, sim.run(iter(arrivals), end_s=end_s)


def test_one_replica_serves_in_arrival_order_by_hand() -> None:
    # 100 ms calls, one row each: 0 -> 0.1; 0.05 waits for it, 0.1 -> 0.2; 0.3 -> 0.4.
    arrivals = [(t, "d", ONLINE, 1, 1.0, 0) for t in (0.0, 0.05, 0.3)]
    _, out = run(one_card(), arrivals, lambda m, g, w: 100.0)
    assert sorted(out.latencies[0]) == pytest.approx([0.1, 0.1, 0.15])
    assert sum(out.ok.values()) == 2 and sum(out.late.values()) == 1  # SLO 120 ms
    # One A10 billed for the day's one second.
    assert sum(out.card_s.values()) == pytest.approx(1.0)
    assert sum(out.cost.values()) == pytest.approx(A10.price_per_hour / 3600)


def test_requests_waiting_together_share_one_call_by_hand() -> None:
    # Calls cost 50 ms + 10 ms per row. The first runs alone (0 -> 0.06); the three that
    # arrive meanwhile go as one batch of 3 rows (0.06 -> 0.14).
    arrivals = [(t, "d", ONLINE, 1, 1.0, 0) for t in (0.0, 0.01, 0.02, 0.03)]
    _, out = run(one_card(batch=4), arrivals, lambda m, g, w: 50.0 + 10.0 * w)
    assert sorted(out.latencies[0]) == pytest.approx([0.06, 0.11, 0.12, 0.13])


def test_a_short_batch_waits_for_rows_until_its_oldest_has_waited_by_hand() -> None:
    # Batch 3, wait 20 ms, calls of 50 ms + 10 ms per row. 0.0 and 0.01 wait; at 0.02 the
    # oldest has waited 20 ms: one call of 2 rows (0.02 -> 0.09). 0.1, 0.105, 0.11 fill a
    # batch at once (0.11 -> 0.19); 0.3 waits alone (0.32 -> 0.38).
    (dep,) = one_card(batch=3)
    waiting = [SimDeployment(dep.name, dep.model, dep.slo_s, dep.timeout_s, dep.slots, 0.02)]
    arrivals = [(t, "d", ONLINE, 1, 1.0, 0) for t in (0.0, 0.01, 0.1, 0.105, 0.11, 0.3)]
    sim, out = run(waiting, arrivals, lambda m, g, w: 50.0 + 10.0 * w)
    assert sorted(out.latencies[0]) == pytest.approx([0.08, 0.08, 0.08, 0.085, 0.09, 0.09])
    assert sim.replicas["d"][0].busy_s == pytest.approx(0.07 + 0.08 + 0.06)


def test_online_goes_before_waiting_offline_and_fifo_does_not() -> None:
    # A long call holds the card; an offline bulk and then an online query wait behind it.
    arrivals = [
        (0.0, "d", ONLINE, 1, 1.0, 0),
        (0.01, "d", OFFLINE, 1, 1.0, 2),
        (0.02, "d", ONLINE, 1, 1.0, 0),
    ]
    _, ours = run(one_card(), arrivals, lambda m, g, w: 100.0)
    _, fifo = run(
        one_card(), arrivals, lambda m, g, w: 100.0, Policy("fifo", "pow2", "fixed", False)
    )
    assert max(ours.latencies[0]) == pytest.approx(0.18)  # 0.02 -> served 0.1 -> 0.2
    assert max(fifo.latencies[0]) == pytest.approx(0.28)  # behind the bulk: 0.2 -> 0.3
    assert ours.offline_rows_done == fifo.offline_rows_done == 1


def test_a_failed_node_loses_no_request() -> None:
    arrivals = [(0.001 * k, "d", ONLINE, 1, 1.0, 0) for k in range(400)]
    sim, out = run(
        one_card(slots=2, nodes=2),
        arrivals,
        lambda m, g, w: 5.0,
        failures=[SimFailure(at_s=0.2, down_s=60.0)],
        settings=SimSettings(replica_start_s=0.05, jitter_sigma=0.0),
    )
    answered = sum(out.ok.values()) + sum(out.late.values()) + sum(out.shed.values())
    assert answered == 400 and out.retried > 0
    # The replica that died restarted on a fresh card: three cards were billed.
    assert len({r.card for r in sim.replicas["d"]}) == 3


def test_busy_autoscaling_follows_a_surge_after_the_delay() -> None:
    # 20 ms calls; 10/s for 100 s (Busy 0.2), then 120/s (2.4 replicas' worth) for 200 s.
    arrivals = [(0.1 * k, "d", ONLINE, 1, 1.0, 0) for k in range(1000)]
    arrivals += [(100.0 + k / 120, "d", ONLINE, 1, 1.0, 0) for k in range(24000)]
    settings = SimSettings(replica_start_s=5.0, jitter_sigma=0.0, upscale_delay_s=30.0, bucket_s=50)
    _, out = run(
        one_card(slots=6, slo_s=1.0),
        arrivals,
        lambda m, g, w: 20.0,
        Policy("ours"),
        settings=settings,
        end_s=300.0,
    )
    before = [n["d"] for t, n in out.replicas_timeline if t < 100]
    after = [n["d"] for t, n in out.replicas_timeline if 180 < t < 300]
    assert max(before) == 1
    assert 4 <= min(after) <= 6  # Busy 0.6 target: 2.4 / 0.6 = 4 replicas
    # The backlog of the 35 s before the new replicas serve is paid for in the next bucket
    # (late and shed); from 200 s on every request is served within its SLO.
    for bucket in (4, 5):
        assert out.ok[(bucket, 0)] == 6000
        assert out.late[(bucket, 0)] == out.shed[(bucket, 0)] == 0


def test_requests_waiting_at_the_handle_get_a_replica_in_the_order_set() -> None:
    # One replica taking one request at a time, 10 ms calls; twenty requests arrive at once.
    arrivals = [(0.0001 * k, "d", ONLINE, 1, 1.0, 0) for k in range(20)]
    answered = {}
    for order in ("fifo", "random"):
        settings = SimSettings(
            replica_start_s=0.0,
            jitter_sigma=0.0,
            max_ongoing_requests=1,
            record_requests=True,
            handle_order=order,
        )
        _, out = run(one_card(slo_s=10.0), arrivals, lambda m, g, w: 10.0, settings=settings)
        answered[order] = [a + lat for a, _, lat in sorted(out.requests)]
    # The same calls back to back either way; only who gets which differs.
    assert sorted(answered["fifo"]) == pytest.approx(sorted(answered["random"]))
    assert answered["fifo"] == sorted(answered["fifo"])
    assert answered["random"] != sorted(answered["random"])


def test_the_day_is_the_same_under_a_seed_and_changes_with_it(tmp_path: Path) -> None:
    from fleet.day import run_day, tune
    from fleet.scenario import Tuning, load_scenario

    root = Path(__file__).resolve().parents[2] / "data" / "mdrp"
    # One target on one planning day: the tuning's search is not what this checks.
    quick = Tuning(targets=[0.6], seeds=[0])
    scenario = load_scenario()
    # Two small cities: determinism does not need the fleet's load, nor Busy pushed every
    # simulated second (most of a day's events are those pushes).
    size = scenario.city_size.model_copy(update={"scale": 2.0})
    fleet = scenario.fleet.model_copy(
        update={"routing_stats_period_s": 5.0, "types": ["A10", "CPU-16core"]}
    )
    small = scenario.model_copy(
        update={"cities": 2, "failures": [], "tuning": quick, "city_size": size, "fleet": fleet}
    )
    tuned = tune(small, root, progress=lambda _: None)  # the same for every day's seed
    runs = [
        run_day(s, root, policies=("ours",), progress=lambda _: None, tuned=tuned)
        for s in (small, small, small.model_copy(update={"seed": 3}))
    ]
    assert all(r["unseen"] for r in runs)  # seeds 2 and 3; tuned on seed 0
    runs = [r["policies"]["ours"] for r in runs]
    strip = [{k: v for k, v in r.items() if k != "sim_wall_s"} for r in runs]
    assert strip[0] == strip[1]
    assert strip[0] != strip[2]


def test_the_apps_admission_lane_admits_queues_and_sheds_by_hand() -> None:
    # The lane (serve_app's own LaneCore): 1 running, 1 queued. 100 ms calls from t=0: the
    # first runs (0 -> 0.1), the second waits in the lane and runs 0.1 -> 0.2, the third finds
    # the queue full and is shed at once; at 0.25 the lane is free again.
    arrivals = [(t, "d", ONLINE, 1, 1.0, 0) for t in (0.0, 0.01, 0.02, 0.25)]
    lanes = SimSettings(replica_start_s=0.0, jitter_sigma=0.0, lanes=(("d", 1, 1),))
    sim, out = run(one_card(slo_s=1.0), arrivals, lambda m, g, w: 100.0, settings=lanes)
    assert sorted(out.latencies[0]) == pytest.approx([0.1, 0.1, 0.19])
    assert sum(out.shed.values()) == 1
    lane = sim.lanes["d"]
    assert (lane.stats.admitted, lane.stats.queued, dict(lane.stats.shed)) == (
        3,
        1,
        {"queue_full": 1},
    )
    assert lane.in_flight == 0 and lane.waiting == 0
    # Without lanes (Serve's default) the replica's queue takes all four.
    _, plain = run(
        one_card(slo_s=1.0),
        arrivals,
        lambda m, g, w: 100.0,
        policy=Policy("fixed", scaler="fixed", admission=False),
        settings=lanes,
    )
    assert sum(plain.shed.values()) == 0 and len(plain.latencies[0]) == 4


def test_a_request_queued_in_its_lane_past_its_deadline_is_shed_there() -> None:
    # Timeout 10 s (one_card); a 20 s call holds the only slot: the queued request's deadline
    # passes in the lane and it never reaches a replica.
    arrivals = [(0.0, "d", ONLINE, 1, 1.0, 0), (0.5, "d", ONLINE, 1, 1.0, 0)]
    lanes = SimSettings(replica_start_s=0.0, jitter_sigma=0.0, lanes=(("d", 1, 4),))
    sim, out = run(one_card(slo_s=30.0), arrivals, lambda m, g, w: 20_000.0, settings=lanes)
    assert out.latencies[0] == pytest.approx([20.0])
    assert sum(out.shed.values()) == 1 and sim.lanes["d"].waiting == 0


def test_the_simulated_delays_are_serves_own() -> None:
    # ServeDelay against the function Serve wraps every autoscaling policy with: the same
    # wishes at the same times, from a random walk of a policy's wants, give the same targets.
    import random

    from ray.serve.autoscaling_policy import _apply_delay_logic
    from ray.serve.config import AutoscalingConfig

    from fleet.engine import ServeDelay

    config = AutoscalingConfig(
        min_replicas=1, max_replicas=8, upscale_delay_s=2.0, downscale_delay_s=10.0
    )
    rng = random.Random(7)
    ours, state = ServeDelay(2.0, 10.0), {}
    target_ours = target_serve = 1
    now, changes, goal = 0.0, 0, 1
    for _ in range(3000):
        now += rng.choice((0.1, 0.3, 1.0))
        if rng.random() < 0.05:  # the load moves now and then
            goal = rng.randint(1, 8)
        # and the policy's wish, read from noisy Busy, sometimes strays by one
        wanted = max(1, min(8, goal + (rng.choice((-1, 1)) if rng.random() < 0.1 else 0)))
        got_serve, state = _apply_delay_logic(wanted, target_serve, config, state, _now=now)
        got_ours = ours.decide(wanted, target_ours, now)
        assert got_ours == got_serve, (now, wanted, target_ours)
        changes += got_ours != target_ours
        target_ours, target_serve = got_ours, got_serve
    assert changes > 20  # the walk did scale both ways


def test_the_days_card_types_meet_each_slo_and_cost_no_more_than_the_peak_plans() -> None:
    from devices.catalog import gpu_types
    from fleet.day import build_day, day_types, inventory
    from fleet.scenario import load_scenario
    from placement.packer import candidate_configs, plan_milp

    root = Path(__file__).resolve().parents[2] / "data" / "mdrp"
    small = load_scenario().model_copy(update={"cities": 2, "failures": []})
    arrivals, _, profiles, demand = build_day(small, root)
    types_of = day_types(small, arrivals, profiles, demand)
    assert set(types_of) == {m.deployment for m in demand.models}
    # Each deployment's type meets its SLO at the day's peak on its profile (measured or
    # derived from a measured one).
    for m in demand.models:
        (chosen,) = types_of[m.deployment]
        card = gpu_types()[chosen]
        assert candidate_configs(m, profiles.get(m.profile, chosen), card.memory_mb)
    plan = plan_milp(inventory(small), demand, profiles, "cost", 5, types_of)
    for r in plan.replicas:
        assert r.config.gpu_type in types_of[r.config.deployment]


def test_requests_to_a_deployment_the_plan_left_out_are_shed_not_lost() -> None:
    # A plan made on days without large rounds has no such deployment: its requests on the day
    # run are counted as shed (online) or not done (offline), the rest served as usual.
    arrivals = [
        (0.0, "d", ONLINE, 1, 1.0, 0),
        (0.1, "left_out", ONLINE, 1, 1.0, 1),
        (0.2, "left_out", OFFLINE, 50, 50.0, 2),
    ]
    _, out = run(one_card(slo_s=1.0), arrivals, lambda m, g, w: 10.0)
    assert sum(out.ok.values()) == 1 and out.shed == {(0, 1): 1}
    assert (out.offline_rows, out.offline_rows_done) == (50, 0)
