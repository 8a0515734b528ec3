"""Node loss on a simulated three-node cluster (run by test_chaos.py in its own process).

    python tests/serve/cluster_chaos.py RESULT.json

Head (controller, proxy, ingress) plus two worker nodes, each with one slot for an OrSolver
replica and one for an Etr replica, so each worker holds exactly one replica of each. Under
steady HTTP load, one worker node is removed (its raylet and every process on it die); later a
fresh worker joins and Serve brings both deployments back to two replicas on it. Writes
{"requests", "failed", "requests_after_removal", "declared_dead_after_s",
"recovered_on_new_node", ...} to RESULT.json.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops import drill
from ops.ports import free_port
from serve_app.builder import build_app
from serve_app.config import DispatchAppArgs

SLOTS = {"or_slot": 1, "etr_slot": 1}
# The head's own slots: the ingress and the offline solver stay off the workers. Without them
# the scheduler may put the only Ingress replica on the worker that is removed, and the request
# it holds then fails at the proxy; that is the loss of the entry point, not what this tests.
HEAD_SLOTS = {"head_slot": 2}


def node_alive(node_id: str) -> bool:
    """Whether the cluster still lists the node as alive."""
    import ray

    return any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())


def _ready(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def main(result_path: Path) -> None:
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "resources": HEAD_SLOTS,
            "gcs_server_port": 0,  # a free port, never Ray's default 6379
            "include_dashboard": False,
            # Declare a lost node dead after ~1.5 s instead of ~30 s.
            "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
        },
    )
    workers = [cluster.add_node(num_cpus=1, resources=SLOTS) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    port = free_port()
    serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
    args = DispatchAppArgs(
        backend="numpy", etr_runtime="onnxruntime", cache={"enabled": False}, resilience={}
    )
    options = {
        "OrSolver": {
            "num_replicas": 2,
            "ray_actor_options": {"num_cpus": 0.1, "resources": {"or_slot": 1}},
        },
        "Etr": {
            "num_replicas": 2,
            "ray_actor_options": {"num_cpus": 0.1, "resources": {"etr_slot": 1}},
        },
        "Ingress": {"ray_actor_options": {"num_cpus": 0.1, "resources": {"head_slot": 1}}},
    }
    for name in ("OrSolver", "Etr"):
        options[name].update(drill.FAST_RECOVERY)
    serve.run(build_app(args, options), name="orml", route_prefix="/")
    url = f"http://127.0.0.1:{port}"
    # The drill is about a node lost under load, not about start-up: the load starts once the
    # app says it is ready (its kernels and readers loaded), as a load balancer's would.
    ready = drill.wait_for(lambda: _ready(url), 120, poll_s=0.2)
    if ready is None:
        raise SystemExit("the app was not ready within 120 s")

    # Half the replicas gone under the same offered load: the one left may shed a request
    # (503 + Retry-After) until the new node's replicas run; the client follows Retry-After up
    # to three times, as a well-behaved one does, and nothing may be lost.
    load = drill.SteadyLoad(url, rate=6.0, shed_retries=3).start()
    time.sleep(2.0)
    removed_at = time.time()
    cluster.remove_node(workers[0])
    # How long the cluster took to say so: calls in flight on the lost node wait that long
    # before they fail over (set to ~1.5 s above; a host starved of CPU takes far longer).
    dead_at = drill.wait_for(lambda: not node_alive(workers[0].node_id), 60, poll_s=0.2)
    # One replica of each is left; the app must keep answering on it.
    time.sleep(max(0.0, removed_at + 6.0 - time.time()))
    cluster.add_node(num_cpus=1, resources=SLOTS)
    recovered = drill.wait_for(
        lambda: all(drill.running_replicas("orml", d) >= 2 for d in ("OrSolver", "Etr")), 120
    )
    time.sleep(1.0)
    samples = load.stop()
    events = serve.get_app_handle("orml").failover_events.remote(removed_at - 5).result()
    result = {
        "requests": len(samples),
        "failed": sum(s.status != 200 for s in samples),
        "failed_statuses": sorted({s.status for s in samples if s.status != 200}),
        "requests_after_removal": sum(s.start > removed_at for s in samples),
        "declared_dead_after_s": None if dead_at is None else round(dead_at - removed_at, 2),
        "deadline_s": args.admission.default_timeout_s,
        # Did the host carry the load before the fault? Requests sent up to 1 s before the
        # removal, and how many of them were answered 200 before it.
        "baseline_sent": len(before := [s for s in samples if s.start < removed_at - 1.0]),
        "baseline_answered": sum(
            s.status == 200 and s.start + s.latency_s < removed_at for s in before
        ),
        "shed_and_retried": sum(s.retries for s in samples),
        # Attempts retried or hedged, by what happened to them ("RayActorError", "Hedged", ...)
        "failover_events": dict(Counter(e["error"] for e in events)),
        "recovered_on_new_node": recovered is not None,
        "recovered_after_s": None if recovered is None else round(recovered - removed_at, 2),
        # (path, status, s after the removal it was sent, latency s, retries, the answer's body)
        "failed_samples": [
            (
                s.path,
                s.status,
                round(s.start - removed_at, 2),
                round(s.latency_s, 2),
                s.retries,
                s.detail,
            )
            for s in samples
            if s.status != 200
        ],
    }
    result_path.write_text(json.dumps(result))
    print(json.dumps(result))
    serve.shutdown()
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
