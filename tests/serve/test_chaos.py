"""Chaos under load: poisoned, hung, crashed and killed replicas, Redis killed and paused, a node
removed. The app keeps answering and no accepted request fails.

The drills run on a second app (``/chaos``: two replicas per model, fault injection on, the
fast-recovery health settings of deploy.yaml, the ETR cache on the private Redis) beside the
session's app; node removal needs its own multi-node cluster (``test_multi_node.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from ops import drill
from serve_app.config import DispatchAppArgs

pytestmark = pytest.mark.serve

APP = "chaos"
REPLICAS = 2


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
