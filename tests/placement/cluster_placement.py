"""Deploy an `orml plan` config on a simulated heterogeneous cluster and see where replicas land.

    python tests/placement/cluster_placement.py RESULT.json

Run by test_cluster_placement.py in its own process (it needs its own Ray). A head node (no
GPUs) and two GPU nodes declared to Ray as a T4 node and an A10 node (``num_gpus`` plus the
``accelerator_type:*`` resource Ray itself sets on real hardware). The plan is made for that
inventory, emitted as a Serve config, deployed, and each replica's node is read back through
Ray's state API. Writes {"replicas": [{"deployment", "planned", "landed"}], ...}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np
import yaml

from devices.profiles import ProfileSet
from placement.emit import emit_config
from placement.inventory import Inventory, load_demand
from placement.packer import PlacementInfeasible, plan_milp
from serve_app.builder import build_app
from serve_app.config import DispatchAppArgs

ROOT = Path(__file__).resolve().parents[2]
NODES = {"T4": "t4-node", "A10": "a10-node"}


def main(result_path: Path) -> None:
    import ray
    from ray import serve
    from ray.cluster_utils import Cluster
    from ray.util.state import list_actors

    inventory = Inventory.model_validate(
        {"nodes": [{"name": n, "gpus": [{"type": t, "count": 2}]} for t, n in NODES.items()]}
    )
    # The example's demand fits on one T4, which would only show one type landing. Tighten the
    # solver tier's p99 until the T4's estimate misses it and the solver needs an A10 (the ETR
    # model stays on the cheaper T4): a plan over both types, whatever the profiles measure.
    profiles = ProfileSet.load(ROOT / "profiles")
    base = load_demand(ROOT / "examples/placement/demand.yaml")
    plan = None
    for p99_ms in np.geomspace(5000.0, 0.01, 60):
        demand = base.model_copy(
            update={
                "models": [
                    m.model_copy(update={"rate_rps": 4.0, "p99_ms": float(p99_ms)})
                    if m.deployment == "OrSolver"
                    else m
                    for m in base.models
                ]
            }
        )
        try:
            plan = plan_milp(inventory, demand, profiles, objective="cost")
        except PlacementInfeasible:
            break
        if {r.config.gpu_type for r in plan.replicas} == set(NODES):
            break
    assert plan is not None
    config = emit_config(plan, yaml.safe_load((ROOT / "deploy.yaml").read_text()))
    app_cfg = config["applications"][0]

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "include_dashboard": True, "dashboard_port": 0},
    )
    for gpu in NODES:
        cluster.add_node(num_cpus=2, num_gpus=2, resources={f"accelerator_type:{gpu}": 1})
    ray.init(address=cluster.address, log_to_driver=False)
    serve.start(proxy_location="HeadOnly", http_options={"host": "127.0.0.1", "port": 0})
    options = {}
    for d in app_cfg["deployments"]:
        opts = {k: v for k, v in d.items() if k != "name"}
        opts.setdefault("ray_actor_options", {})["num_cpus"] = 0.1
        options[d["name"]] = opts
    args = DispatchAppArgs(**{**app_cfg["args"], "backend": "numpy", "etr_runtime": "onnxruntime"})
    serve.run(build_app(args, options), name="orml", route_prefix="/")

    node_type = {}
    for node in ray.nodes():
        accel = [r.split(":", 1)[1] for r in node["Resources"] if r.startswith("accelerator_type:")]
        node_type[node["NodeID"]] = accel[0] if accel else "none"
    planned = {name: cfg.gpu_type for name, cfg in plan.configs().items()}
    accel_of = {"T4": "T4", "A10": "A10"}
    replicas = []
    for actor in list_actors(filters=[("state", "=", "ALIVE")], detail=True, limit=1000):
        name = actor.class_name or ""
        if not name.startswith("ServeReplica:orml:"):
            continue
        deployment = name.split(":")[-1]
        if deployment in planned:
            replicas.append(
                {
                    "deployment": deployment,
                    "planned": accel_of[planned[deployment]],
                    "landed": node_type[actor.node_id],
                }
            )
    result = {
        "replicas": replicas,
        "expected_replicas": len(plan.replicas),
        "plan": {d: {"type": c.gpu_type, "share": c.share} for d, c in plan.configs().items()},
    }
    result_path.write_text(json.dumps(result))
    print(json.dumps(result))
    serve.shutdown()
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
