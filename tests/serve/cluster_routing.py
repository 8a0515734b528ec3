"""Local-first routing with spill-over on a simulated two-node cluster (run by
test_scheduling_serve.py in its own process).

    python tests/serve/cluster_routing.py RESULT.json

The head holds the ingress and one OrSolver replica, a worker node the other (one slot each).
The replicas emulate a device whose call takes 150 ms (``actors.emulation``), so load builds
up on 2 cores. One round at a time, the router sends every round to the head's replica (the
caller's node); 12 rounds at once, the local replica is busy past the spill threshold and
rounds go to the worker. Each answer names the replica that solved it (``solved_by``); Ray's
state API says which node that replica is on. Writes {"quiet": {...}, "busy": {...}}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.ports import free_port
from planner import generate_round
from serve_app.builder import build_app
from serve_app.config import DispatchAppArgs
from serve_app.schemas import DispatchRequest


def main(result_path: Path) -> None:
    import httpx
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster
    from ray.util.state import list_actors

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 2,
            "resources": {"solver_slot": 1, "head_slot": 2},
            "gcs_server_port": 0,  # a free port, never Ray's default 6379
            "include_dashboard": True,  # for the state API (which node each replica is on)
            "dashboard_port": 0,
        },
    )
    cluster.add_node(num_cpus=1, resources={"solver_slot": 1})
    ray.init(address=cluster.address, log_to_driver=False)
    port = free_port()
    serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": port})
    # The emulated device: each solve takes 150 ms, sleeping off the CPU.
    args = DispatchAppArgs(
        backend="numpy", etr_runtime="onnxruntime", emulate_solver={"call_ms": 150.0}
    )
    on_head = {"num_cpus": 0.1, "resources": {"head_slot": 1}}
    options = {
        "OrSolver": {
            "num_replicas": 2,
            "ray_actor_options": {"num_cpus": 0.1, "resources": {"solver_slot": 1}},
        },
        "Etr": {"ray_actor_options": on_head},
        "Ingress": {"ray_actor_options": on_head},
    }
    serve.run(build_app(args, options), name="orml", route_prefix="/")
    head = ray.get_runtime_context().get_node_id()
    node_of = {}
    for actor in list_actors(filters=[("state", "=", "ALIVE")], detail=True, limit=1000):
        name = actor.name or ""
        if name.startswith("SERVE_REPLICA::orml#OrSolver#"):
            node_of[name.rsplit("#", 1)[1]] = actor.node_id
    assert len(node_of) == 2 and len(set(node_of.values())) == 2, node_of
    url = f"http://127.0.0.1:{port}/v1/dispatch"
    bodies = [
        DispatchRequest.from_domain(generate_round(20, 5, seed=60 + k)).model_dump_json()
        for k in range(12)
    ]
    headers = {"content-type": "application/json"}

    def where(replies) -> dict[str, int]:
        places = Counter()
        for r in replies:
            if r.status_code != 200:
                places["failed"] += 1
            else:
                node = node_of.get(r.json()["solved_by"])
                places["local" if node == head else "remote"] += 1
        return {"local": places["local"], "remote": places["remote"], "failed": places["failed"]}

    with httpx.Client(timeout=60) as c:
        c.post(url, content=bodies[0], headers=headers)  # warm
        quiet = [c.post(url, content=b, headers=headers) for b in bodies[:10]]

    async def burst():
        async with httpx.AsyncClient(timeout=60) as c:
            return await asyncio.gather(*(c.post(url, content=b, headers=headers) for b in bodies))

    busy = asyncio.run(burst())
    result = {"quiet": where(quiet), "busy": where(busy)}
    result_path.write_text(json.dumps(result))
    print(json.dumps(result))
    serve.shutdown()
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
