"""A served replay (`orml replay --url`): every round of a real delivery day goes through
/v1/dispatch of a running app (every weight variant a round is planned under, and every round
of a rollout that judges one: one call each), and the day's decisions equal the in-process
replay's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ops.replay_client import ServedDecider
from planner.mdrp import ReplayPolicy, load_instance, replay

DAY = Path(__file__).resolve().parents[2] / "data" / "mdrp" / "0o50t100s1p100"


def _morning(tmp_path: Path, orders: int = 40) -> Path:
    """The day's first ``orders`` orders, every courier: a short, real replay."""
    folder = tmp_path / "morning"
    shutil.copytree(DAY, folder)
    lines = (DAY / "orders.txt").read_text().splitlines()
    head, body = lines[0], sorted(lines[1:], key=lambda ln: int(ln.split("\t")[3]))
    (folder / "orders.txt").write_text("\n".join([head, *body[:orders]]) + "\n")
    return folder


@pytest.mark.parametrize(
    "policy",
    [ReplayPolicy(), ReplayPolicy(plans=3, rollout_min=5)],
    ids=["default", "rollouts"],
)
def test_a_served_replay_decides_as_the_in_process_one(
    serve_url: str, tmp_path: Path, policy: ReplayPolicy
):
    inst = load_instance(_morning(tmp_path))
    local = replay(inst, policy)
    with ServedDecider(serve_url) as decide:
        served = replay(inst, policy, decide=decide)
    assert decide.summary()["calls"] == served.plans
    assert served.rounds == local.rounds > 10
    assert served.bundles == local.bundles
    assert served.moves == local.moves  # prepositioning included
    assert served.undelivered == local.undelivered
