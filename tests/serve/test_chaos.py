"""Chaos under load: poisoned, hung, crashed and killed replicas, Redis killed and paused, a node
removed. The app keeps answering and no accepted request fails.

The drills run on a second app (``/chaos``: two replicas per model, fault injection on, the
fast-recovery health settings of deploy.yaml, the ETR cache on the private Redis) beside the
session's app; node removal needs its own multi-node cluster, so it runs in a subprocess
(``cluster_chaos.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ops import drill
from serve_app.config import DispatchAppArgs

pytestmark = pytest.mark.serve

APP = "chaos"
REPLICAS = 2
# The node-loss drill sets Ray's node health check to declare a lost node dead in ~1.5 s, and
# the idle 2-core box has both replicas back on the new node ~10 s after the removal. A host
# starved of CPU takes longer for either, and then the calls held on the lost node, or queued
# on the one replica left, cannot all be served before their deadline.
SLOW_DETECTION_S = 4.0
SLOW_RECOVERY_S = 20.0


@pytest.fixture(scope="module")
def chaos_url(serve_url: str, redis_server) -> Iterator[str]:
    from ray import serve

    from serve_app.builder import build_app

    if not redis_server.running():
        redis_server.start()
    args = DispatchAppArgs(
        backend="numpy",
        etr_runtime="onnxruntime",
        cache={"redis_url": redis_server.url},
        resilience={"replicas": {"fault_injection": True, "watchdog_s": 1.0}},
    )
    options = {d: {"num_replicas": REPLICAS, **drill.FAST_RECOVERY} for d in ("OrSolver", "Etr")}
    # Small CPU shares: the session's app is deployed beside this one.
    for d in ("Ingress", "OrSolver", "Etr"):
        options.setdefault(d, {})["ray_actor_options"] = {"num_cpus": 0.1}
    serve.run(build_app(args, options), name=APP, route_prefix=f"/{APP}")
    try:
        yield f"{serve_url}/{APP}"
    finally:
        serve.delete(APP)


def test_fault_injection_is_404_unless_enabled(serve_url):
    r = httpx.post(
        f"{serve_url}/admin/faults", json={"deployment": "Etr", "kind": "crash"}, timeout=30
    )
    assert r.status_code == 404
    assert "/admin/faults" not in httpx.get(f"{serve_url}/openapi.json", timeout=30).json()["paths"]


@pytest.mark.parametrize(
    ("deployment", "kind"), [("OrSolver", "poison"), ("Etr", "hang"), ("OrSolver", "crash")]
)
def test_a_failing_replica_is_replaced_and_no_request_fails(chaos_url, deployment, kind):
    res = drill.run_drill(chaos_url, APP, deployment, kind, REPLICAS, rate=8.0)
    row = res.row()
    assert row["requests"] > 20
    assert row["failed"] == 0, [s for s in res.samples if s.status != 200][:5]
    assert row["full_capacity_s"] is not None, res.events  # a replacement is RUNNING
    assert res.replica not in drill.replica_ids(APP, deployment)
    if kind == "poison":
        # Refused, not answered wrongly: the poisoned replica stopped taking work before its
        # replacement ran. How soon is the drill table's figure (ops/drill.py), not a test's
        # assert: on a loaded 2-core host it took 1.1 s once.
        assert row["detected_s"] is not None and row["detected_s"] <= row["full_capacity_s"]


def test_killing_a_replica_actor_loses_nothing(chaos_url):
    import ray

    assert drill.wait_for(lambda: drill.running_replicas(APP, "Etr") >= REPLICAS, 60)
    victim = sorted(drill.replica_ids(APP, "Etr"))[0]
    load = drill.SteadyLoad(chaos_url, rate=8.0).start()
    time.sleep(1.5)
    ray.kill(ray.get_actor(f"SERVE_REPLICA::{APP}#Etr#{victim}", namespace="serve"))
    back = drill.wait_for(
        lambda: (
            victim not in drill.replica_ids(APP, "Etr")
            and drill.running_replicas(APP, "Etr") >= REPLICAS
        ),
        60,
    )
    time.sleep(1.0)
    samples = load.stop()
    assert back is not None
    assert [s for s in samples if s.status != 200] == []


def test_redis_killed_and_paused_under_load_loses_nothing(chaos_url, redis_server):
    with httpx.Client(timeout=30) as c:
        assert c.get(f"{chaos_url}/admin/status").json()["cache"]["levels"] == "l1+l2"
    load = drill.SteadyLoad(chaos_url, rate=8.0).start()
    try:
        time.sleep(1.0)
        redis_server.kill()
        time.sleep(1.5)
        redis_server.start()
        time.sleep(1.0)
        redis_server.pause()
        time.sleep(1.5)
    finally:
        redis_server.resume()
    time.sleep(1.0)
    samples = load.stop()
    assert len(samples) > 40
    assert [s for s in samples if s.status != 200] == []
    # A paused Redis never holds a request long: calls time out at redis_timeout_s (50 ms).
    assert max(s.latency_s for s in samples) < 5.0


def test_removing_a_node_while_it_serves_loses_nothing(tmp_path):
    script = Path(__file__).with_name("cluster_chaos.py")
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=420
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
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
