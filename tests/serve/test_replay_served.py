"""A served replay (`orml replay --url`): every round of a real delivery day goes through
/v1/dispatch of a running app (every weight variant a round is planned under, and every round
of a rollout that judges one: one call each), and the day's decisions equal the in-process
replay's."""

from __future__ import annotations

from pathlib import Path

from ops.replay_client import ServedDecider
from planner.mdrp import ReplayPolicy, load_instance, replay
from tests.mdrp_days import morning


def test_a_served_replay_decides_as_the_in_process_one(serve_url: str, tmp_path: Path):
    """One-round pricing here; the default policy's rollouts in the paced replay below."""
    policy = ReplayPolicy(rollout_min=0)
    inst = load_instance(morning(tmp_path / "morning"))
    local = replay(inst, policy)
    with ServedDecider(serve_url) as decide:
        served = replay(inst, policy, decide=decide)
    assert decide.summary()["calls"] == served.plans
    assert served.rounds == local.rounds > 10
    assert served.bundles == local.bundles
    assert served.moves == local.moves  # prepositioning included
    assert served.undelivered == local.undelivered
    assert served.rollouts == local.rollouts


def test_a_paced_replay_paces_the_days_rounds_and_sends_rollouts_at_once(
    serve_url: str, tmp_path: Path
):
    """Paced (``--speedup``), a round leaves at its minute of the day; a rollout's rounds are
    minutes still to come, so they go at once (paced, each would hold the day's next round
    back by up to ``rollout_min`` minutes of the day). Under the default policy (rollouts
    judging variants that disagree) it decides as the in-process replay."""
    inst = load_instance(morning(tmp_path / "morning"))
    local = replay(inst)
    with ServedDecider(serve_url, speedup=6000) as decide:
        served = replay(inst, decide=decide)
    assert served.rounds == local.rounds > 10
    assert served.bundles == local.bundles
    assert served.moves == local.moves
    assert served.undelivered == local.undelivered
    assert served.rollouts == local.rollouts > 0  # variants disagreed, and rollouts judged them
    assert served.rollout_plans == local.rollout_plans > 0
    summary = decide.summary()
    assert summary["calls"] == served.plans
    assert summary["paced"] == served.plans - served.rollout_plans
