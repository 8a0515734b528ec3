"""Drills on a cluster of several nodes, each started in a subprocess of its own (the
session's shared app is one node): a node removed while it serves (``cluster_chaos.py``), and
the router keeping calls on the caller's node until it is busy (``cluster_routing.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.serve

# The node-loss drill sets Ray's node health check to declare a lost node dead in ~1.5 s, and
# the idle 2-core box has both replicas back on the new node ~10 s after the removal. A host
# starved of CPU takes longer for either, and then the calls held on the lost node, or queued
# on the one replica left, cannot all be served before their deadline.
SLOW_DETECTION_S = 4.0
SLOW_RECOVERY_S = 20.0


def drill_result(script: str, tmp_path: Path) -> dict:
    """Runs ``script`` (beside this file) with the path it writes its JSON result to."""
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name(script)), str(out)],
        capture_output=True,
        text=True,
        timeout=420,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(out.read_text())


def test_removing_a_node_while_it_serves_loses_nothing(tmp_path):
    result = drill_result("cluster_chaos.py", tmp_path)
    if result["baseline_answered"] < 0.8 * result["baseline_sent"]:
        # On a host too slow for the drill's load even before the fault, what follows
        # measures the host; on one that carries it nothing may be lost (below).
        pytest.skip(f"the host did not carry the drill's load before the fault: {result}")
    # The message is the whole result as text: pytest would cut a dict's repr short.
    said = json.dumps(result, indent=1)
    assert result["requests_after_removal"] > 10, said
    assert result["recovered_on_new_node"], said
    detected_s = result["declared_dead_after_s"]
    if (
        detected_s is not None
        and detected_s <= SLOW_DETECTION_S
        and result["recovered_after_s"] <= SLOW_RECOVERY_S
    ):
        assert result["failed"] == 0, said
    else:
        # Calls waited for the cluster to notice the loss or for the one replica left: past
        # their deadline they are answered 504 and hold their admission slots, so requests
        # behind them are shed with 503 + Retry-After. Answered in time and clearly, never a 500 or
        # a dropped connection (docs/operations.md, node loss).
        assert set(result["failed_statuses"]) <= {503, 504}, said


def test_on_two_nodes_the_router_stays_local_then_spills_when_the_local_node_is_busy(tmp_path):
    result = drill_result("cluster_routing.py", tmp_path)
    assert result["quiet"]["remote"] == 0 and result["quiet"]["local"] >= 8, result
    assert result["busy"]["remote"] > 0, result  # spilled
    assert result["busy"]["failed"] == 0, result
