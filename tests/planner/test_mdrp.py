"""MDRP days: the loader's errors, a replay that the independent evaluator passes, and the
evaluator catching each kind of broken solution (hand-made, on a three-order day)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from domain import DispatchWeights
from planner import generate_round
from planner.mdrp import MdrpInstanceError, Replay, ReplayPolicy, evaluate, load_instance, replay
from planner.mdrp.plan_choice import Rollouts, plan_rounds, plan_variants
from planner.mdrp.solution import FILES, write_solution
from tests.mdrp_days import DAY, morning

TINY = {
    "instance_parameters.txt": "meters_per_minute\tpickup service minutes\tdropoff service "
    "minutes\ttarget click-to-door\tmaximum click-to-door\tpay per order\tguaranteed pay per "
    "hour\n100\t4\t4\t40\t90\t10\t15\n",
    "restaurants.txt": "restaurant\tx\ty\nr1\t0\t0\nr2\t1000\t0\n",
    "orders.txt": "order\tx\ty\tplacement_time\trestaurant\tready_time\n"
    "o1\t0\t500\t0\tr1\t10\no2\t0\t1000\t2\tr1\t12\no3\t1000\t500\t5\tr2\t15\n",
    "couriers.txt": "courier\tx\ty\ton_time\toff_time\nc1\t0\t0\t0\t120\nc2\t1000\t1000\t0\t120\n",
}
# c1 takes o1 and o2 from r1 (it starts there); c2 drives 10 min to r2 for o3.
VALID = {
    "solution_info_assignments.txt": "assignment_time pickup_time courier orders\n"
    "2 12 c1 o1 o2\n5 17 c2 o3\n",
    "solution_info_orders.txt": "order placement_time ready_time pickup_time dropoff_time courier\n"
    "o1 0 10 12 21 c1\no2 2 12 12 30 c1\no3 5 15 17 26 c2\n",
    "solution_info_couriers.txt": "courier departure_time origin destination\n"
    "c1 2 0 r1\nc1 14 r1 o1\nc1 23 o1 o2\nc2 5 0 r2\nc2 19 r2 o3\n",
}


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return _write(tmp_path / "tiny", TINY)


def broken(tmp_path: Path, name: str, old: str, new: str) -> Path:
    files = dict(VALID)
    assert old in files[name]
    files[name] = files[name].replace(old, new)
    return _write(tmp_path / "broken", files)


# ---- loader ---------------------------------------------------------------------------------
def test_an_instance_loads_with_its_rules(tiny: Path):
    inst = load_instance(tiny)
    assert [o.id for o in inst.orders] == ["o1", "o2", "o3"]
    assert inst.travel_minutes((0, 0), (0, 450)) == 5  # ceil(4.5)
    assert load_instance(DAY).params.meters_per_minute == 320


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        (
            "orders.txt",
            "o2\t0\t1000\t2\tr1",
            "o2\t0\t1000\t2\tr9",
            "orders.txt:3: unknown restaurant",
        ),
        ("orders.txt", "o3\t1000\t500\t5", "o3\t1000\t500\tfive", "orders.txt:4: placement_time"),
        (
            "couriers.txt",
            "c2\t1000\t1000\t0\t120",
            "c2\t1000\t1000\t0",
            "couriers.txt:3: expected 5",
        ),
        ("couriers.txt", "c1\t0\t0\t0\t120", "c1\t0\t0\t130\t120", "couriers.txt:2: off_time"),
        ("restaurants.txt", "r2\t1000", "r1\t1000", "restaurants.txt:3: duplicate"),
    ],
)
def test_a_bad_file_is_named_with_its_line(tmp_path: Path, name, old, new, message):
    files = dict(TINY)
    files[name] = files[name].replace(old, new)
    with pytest.raises(MdrpInstanceError, match=message.replace(".", r"\.")):
        load_instance(_write(tmp_path / "bad", files))


def test_a_missing_file_is_named(tiny: Path):
    (tiny / "couriers.txt").unlink()
    with pytest.raises(MdrpInstanceError, match=r"couriers\.txt: cannot read"):
        load_instance(tiny)


# ---- evaluator ------------------------------------------------------------------------------
def test_the_hand_made_solution_is_feasible_and_scored(tiny: Path, tmp_path: Path):
    ev = evaluate(tiny, _write(tmp_path / "ok", VALID))
    assert ev.violations == []
    m = ev.metrics
    assert m.delivered_pct == 100
    assert m.click_to_door_mean == pytest.approx((21 + 28 + 21) / 3)
    assert m.ready_to_pickup_mean == pytest.approx((2 + 0 + 2) / 3)
    assert m.orders_per_bundle == 1.5
    # pay: each courier's 2 h guarantee ($30) beats $10 x orders: $60 for 3 orders
    assert m.cost_per_order == pytest.approx(20.0)
    # driving 0+5+5 + 10+5 = 25 min, service 4+8 + 4+4 = 20 min, over 240 duty minutes
    assert m.utilisation == pytest.approx(45 / 240)


@pytest.mark.parametrize(
    ("name", "old", "new", "message"),
    [
        ("solution_info_assignments.txt", "5 17 c2 o3", "5 17 c2 o3 o1", "more than one bundle"),
        ("solution_info_assignments.txt", "2 12 c1", "1 12 c1", "before order o2 was placed"),
        ("solution_info_assignments.txt", "5 17 c2 o3", "5 14 c2 o3", "before order o3 is ready"),
        ("solution_info_assignments.txt", "5 17 c2 o3", "5 127 c2 o3", "after courier c2's off"),
        (
            "solution_info_assignments.txt",
            "2 12 c1 o1 o2",
            "2 12 c1 o1 o3",
            "more than one restaurant",
        ),
        ("solution_info_couriers.txt", "c2 5 0 r2", "c2 8 0 r2", "c2 is not at r2 by 15"),
        ("solution_info_couriers.txt", "c1 14 r1 o1", "c1 13 r1 o1", "leaves r1 before the pickup"),
        ("solution_info_couriers.txt", "c1 23 o1 o2", "c1 23 r1 o2", "leaves r1 but is at o1"),
        ("solution_info_couriers.txt", "c1 23 o1 o2", "c1 22 o1 o2", "busy until 23"),
        (
            "solution_info_orders.txt",
            "o2 2 12 12 30 c1",
            "o2 2 12 12 24 c1",
            "3 min after the previous",
        ),
        (
            "solution_info_orders.txt",
            "o2 2 12 12 30 c1",
            "o2 2 12 12 27 c1",
            "does not reach the customer",
        ),
        (
            "solution_info_orders.txt",
            "o3 5 15 17 26 c2",
            "o3 5 15 17 26 c1",
            "disagree with its bundle",
        ),
        (
            "solution_info_orders.txt",
            "o3 5 15 17 26 c2",
            "o3 5 15 nan nan nan",
            "not listed as delivered",
        ),
    ],
)
def test_each_violation_is_caught(tiny: Path, tmp_path: Path, name, old, new, message):
    ev = evaluate(tiny, broken(tmp_path, name, old, new))
    assert not ev.feasible
    assert any(message in v for v in ev.violations), ev.violations


# ---- replay ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def replayed_day() -> Replay:
    """The real day replayed under the default policy (two tests read it)."""
    return replay(load_instance(DAY))


def test_a_replayed_day_passes_the_independent_evaluator(replayed_day: Replay, tmp_path: Path):
    inst, day = load_instance(DAY), replayed_day
    paths = write_solution(inst, day, tmp_path / "sol")
    assert [p.name for p in paths] == list(FILES)
    ev = evaluate(DAY, tmp_path / "sol")
    assert ev.violations == []
    assert ev.metrics.delivered_pct >= 99.0
    assert ev.metrics.orders_per_bundle >= 1.0
    # every order is either in exactly one bundle or reported undelivered
    bundled = [o for b in day.bundles for o in b.orders]
    assert len(bundled) == len(set(bundled))
    assert sorted(bundled + day.undelivered) == sorted(o.id for o in inst.orders)


def test_an_assignment_is_committed_only_when_its_courier_must_leave(tiny: Path, tmp_path: Path):
    inst = load_instance(tiny)
    # no prepositioning, no early commitment in shortage: only the timing rule is at work
    policy = ReplayPolicy(candidate_riders=None, reposition_min=0, short_commit_min=0)
    day = replay(inst, policy)
    write_solution(inst, day, tmp_path / "sol")
    assert evaluate(tiny, tmp_path / "sol").violations == []
    assert sorted(o for b in day.bundles for o in b.orders) == ["o1", "o2", "o3"]
    firsts = {}
    for b in day.bundles:  # a courier's first bundle starts where the courier started
        firsts.setdefault(b.courier, b)
    for cid, b in firsts.items():
        courier = next(c for c in inst.couriers if c.id == cid)
        rest = inst.restaurants[b.restaurant]
        ready = min(o.ready for o in inst.orders if o.id in b.orders)
        arrive = b.assigned_at + inst.travel_minutes((courier.x, courier.y), (rest.x, rest.y))
        assert arrive + 2 >= ready - policy.round_min  # at most a round early for the food


def _one_restaurant_day(folder: Path, orders: str, couriers: str) -> Path:
    files = dict(TINY)
    files["restaurants.txt"] = "restaurant\tx\ty\nr1\t0\t0\n"
    files["orders.txt"] = "order\tx\ty\tplacement_time\trestaurant\tready_time\n" + orders
    files["couriers.txt"] = "courier\tx\ty\ton_time\toff_time\n" + couriers
    return _write(folder, files)


@pytest.mark.parametrize(
    "orders, couriers, bundles",
    [
        # One courier at r1 (0, 0): o2 alone would wait ~20 min for it to come back; riding
        # along behind o1 (whose door is on the way) costs o1 nothing: one bundle.
        (
            "o1\t0\t1000\t0\tr1\t10\no2\t0\t1100\t0\tr1\t10\n",
            "c1\t0\t0\t0\t120\n",
            [("o1", "o2")],
        ),
        # Two couriers there and doors in opposite directions: riding along would add ~24 min
        # to o2, which the second courier delivers on time: no bundle. (More orders are open
        # than couriers are free, which is what the rule before bundled on.)
        (
            "o1\t0\t1000\t0\tr1\t10\no2\t0\t-1000\t0\tr1\t10\no3\t500\t0\t0\tr1\t40\n",
            "c1\t0\t0\t0\t120\nc2\t0\t0\t0\t120\n",
            [("o1",), ("o2",), ("o3",)],
        ),
    ],
)
def test_a_mate_joins_a_bundle_only_where_it_gains(tmp_path: Path, orders, couriers, bundles):
    folder = _one_restaurant_day(tmp_path / "day", orders, couriers)
    inst = load_instance(folder)
    day = replay(inst, ReplayPolicy(candidate_riders=None, reposition_min=0))
    assert sorted(b.orders for b in day.bundles) == bundles
    write_solution(inst, day, tmp_path / "sol")
    assert evaluate(folder, tmp_path / "sol").violations == []


def test_plans_judged_by_rollouts_keep_the_day_feasible_and_its_own(tmp_path: Path):
    folder = morning(tmp_path / "morning")
    inst = load_instance(folder)
    plain = replay(inst, ReplayPolicy(plans=3, rollout_min=0))
    rolled = replay(inst, ReplayPolicy(plans=3, rollout_min=10))
    assert plain.rollouts == 0 < rolled.rollouts
    assert rolled.plans > plain.plans  # a rollout's rounds are dispatch calls too
    write_solution(inst, rolled, tmp_path / "sol")
    assert evaluate(folder, tmp_path / "sol").violations == []
    assert replay(inst, ReplayPolicy(plans=3, rollout_min=10)).bundles == rolled.bundles


def test_plans_rolled_out_once_per_thing_they_do_now_decide_as_each_rolled_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A round rolls out one plan per signature (the bundles and moves a plan makes final
    now, and the couriers it finds past their shift) and none that does now what the first
    plan does: the day is the one rolling out every distinct plan gives, for fewer rollouts."""
    inst = load_instance(morning(tmp_path / "morning"))
    policy = ReplayPolicy(plans=5, rollout_min=10)
    shared = replay(inst, policy)

    def each_on_its_own(self: Rollouts, plan: dict[str, str]) -> float:
        committed = self.clock.commit_on_fork(self.t, self.round_, plan, self.open_)
        return self.roll_out(committed[:3])

    monkeypatch.setattr(Rollouts, "differs", lambda self, plan: True)
    monkeypatch.setattr(Rollouts, "cost", each_on_its_own)
    each = replay(inst, policy)
    assert (shared.bundles, shared.moves, shared.undelivered) == (
        each.bundles,
        each.moves,
        each.undelivered,
    )
    assert 0 < shared.rollouts < each.rollouts


def test_a_round_whose_variants_agree_is_not_priced(tiny: Path):
    # Every variant of the three-order day plans alike: no rollout runs, and the calls are
    # the variants' alone.
    inst = load_instance(tiny)
    plain = replay(inst, ReplayPolicy(plans=3, rollout_min=0))
    rolled = replay(inst, ReplayPolicy(plans=3, rollout_min=10))
    assert rolled.rollouts == 0 and rolled.plans == plain.plans
    assert rolled.bundles == plain.bundles


def test_a_copy_of_the_day_replays_the_same(replayed_day: Replay, tmp_path: Path):
    shutil.copytree(DAY, tmp_path / "copy")
    assert replay(load_instance(tmp_path / "copy")).bundles == replayed_day.bundles


def test_a_prepositioning_move_is_a_feasible_move(tiny: Path, tmp_path: Path):
    # c2 drives to r2 at minute 0 with nothing to pick up yet, waits there, and is given o3
    # later: the evaluator accepts a move that is no pickup, as long as the moves join up.
    files = dict(VALID)
    files["solution_info_couriers.txt"] = files["solution_info_couriers.txt"].replace(
        "c2 5 0 r2", "c2 0 0 r2"
    )
    ev = evaluate(tiny, _write(tmp_path / "sol", files))
    assert ev.violations == []


def test_idle_couriers_are_sent_to_restaurants_and_the_day_stays_feasible(tmp_path: Path):
    inst = load_instance(DAY)
    restaurants = set(inst.restaurants)

    def repositions(day) -> int:  # moves to a restaurant that no bundle starts with
        starts = {(b.courier, b.assigned_at, b.restaurant) for b in day.bundles}
        return sum(
            m.destination in restaurants and (m.courier, m.depart, m.destination) not in starts
            for m in day.moves
        )

    on = replay(inst, ReplayPolicy(plans=1))
    off = replay(inst, ReplayPolicy(plans=1, reposition_min=0))
    assert repositions(on) > 0
    assert repositions(off) == 0
    write_solution(inst, on, tmp_path / "sol")
    assert evaluate(DAY, tmp_path / "sol").violations == []


def test_plan_variants_start_with_the_plain_weights_and_never_repeat():
    w = DispatchWeights(late_weight=4.0, max_orders_per_rider=3, candidate_riders=48)
    assert plan_variants(w, 1) == [w]
    many = plan_variants(w, 100)
    assert many[0] == w and len(many) == len(set(many)) == 45
    assert plan_variants(w, 5) == many[:5]
    one_each = DispatchWeights(max_orders_per_rider=1)
    assert all(v.max_orders_per_rider == 1 for v in plan_variants(one_each, 100))
    assert len(set(plan_variants(one_each, 100))) == len(plan_variants(one_each, 100))


def test_a_round_is_planned_once_more_without_the_orders_ready_later():
    round_ = generate_round(8, 6, seed=5)
    ready_in = [round((o.ready_at - round_.now) / 60) for o in round_.orders]
    later = max(ready_in)
    rounds = plan_rounds(round_, 3, later - 1)
    assert rounds[0] is round_
    assert [r.weights for r in rounds[:3]] == plan_variants(round_.weights, 3)
    assert all(r.orders == round_.orders for r in rounds[:3])
    soon = [o for o, m in zip(round_.orders, ready_in, strict=True) if m <= later - 1]
    assert len(rounds) == 4 and list(rounds[3].orders) == soon and rounds[3].riders == round_.riders
    assert rounds[3].weights == round_.weights
    # None where it leaves no order out, where it is off, or where there is no choice.
    assert len(plan_rounds(round_, 3, later + 1)) == 3
    assert len(plan_rounds(round_, 3, 0)) == 3
    assert plan_rounds(round_, 1, later - 1) == [round_]


def test_plans_that_leave_later_orders_for_later_keep_the_day_feasible(tmp_path: Path):
    folder = morning(tmp_path / "morning")
    inst = load_instance(folder)
    without = replay(inst, ReplayPolicy(plans=3, defer_min=0))
    deferring = replay(inst, ReplayPolicy(plans=3, defer_min=5))
    assert deferring.plans > without.plans  # the rounds with later orders planned once more
    write_solution(inst, deferring, tmp_path / "sol")
    assert evaluate(folder, tmp_path / "sol").violations == []


def test_a_spent_round_budget_plans_once_and_decides_as_one_plan():
    inst = load_instance(DAY)
    one = replay(inst, ReplayPolicy(plans=1))
    capped = replay(inst, ReplayPolicy(plans=45, round_budget_ms=1e-6))
    assert capped.plans == one.plans  # the first plan always runs, then the budget is spent
    assert capped.bundles == one.bundles
    five = replay(inst, ReplayPolicy(plans=5, rollout_min=0))
    assert five.plans > 4 * one.plans  # every variant planned where the budget allows


@pytest.mark.parametrize(
    "field, value",
    [
        ("plans", 0),
        ("round_budget_ms", 0.0),
        ("reposition_min", -1),
        ("rollout_min", -1),
        ("defer_min", -1),
    ],
)
def test_a_bad_policy_is_refused(field, value):
    with pytest.raises(ValueError, match=field):
        ReplayPolicy(**{field: value})
