"""A plan as a Ray Serve config: replica counts, GPU fractions, accelerator types, batch sizes.

``emit_config(plan, base)`` takes a Serve config (deploy.yaml, parsed) and rewrites the
planned deployments: ``num_replicas`` (autoscaling removed: the plan fixes the count),
``ray_actor_options.num_gpus`` (the replica's share of a card) and ``accelerator_type`` (Ray
then schedules it only on nodes with that card), or on a CPU node ``num_cpus`` (its share of
the node's cores, ``sm_count`` in ``devices/gpu_types.yaml``), and for deployments that take a
``user_config`` with ``max_batch_size`` (Etr) the planned batch and ``memory_budget_mb``.
Deployments the plan does not cover are left as they are.
"""

from __future__ import annotations

import copy
from typing import Any

from devices.catalog import gpu_types
from placement.packer import Plan

#: Deployments whose user_config carries a batch size and memory budget.
BATCHED = {"Etr"}


def emit_config(plan: Plan, base: dict[str, Any], app: str | None = None) -> dict[str, Any]:
    """A copy of ``base`` with ``plan`` applied to application ``app`` (default: the first)."""
    config = copy.deepcopy(base)
    apps = config["applications"]
    target = next((a for a in apps if app is None or a["name"] == app), None)
    if target is None:
        raise ValueError(f"no application {app!r} in the config")
    deployments = {d["name"]: d for d in target.setdefault("deployments", [])}
    counts: dict[str, int] = {}
    for r in plan.replicas:
        counts[r.config.deployment] = counts.get(r.config.deployment, 0) + 1
    for name, cfg in plan.configs().items():
        d = deployments.get(name)
        if d is None:
            d = {"name": name}
            target["deployments"].append(d)
        d.pop("autoscaling_config", None)
        d["num_replicas"] = counts[name]
        options = d.setdefault("ray_actor_options", {})
        device = gpu_types()[cfg.gpu_type]
        if device.ray_accelerator is not None:
            options["num_gpus"] = cfg.share
            options["accelerator_type"] = device.ray_accelerator
        else:  # a CPU node: its share of the node's cores, and no card
            options.pop("num_gpus", None)
            options.pop("accelerator_type", None)
            options["num_cpus"] = round(cfg.share * device.sm_count, 2)
        if name in BATCHED:
            user = d.setdefault("user_config", {})
            user["max_batch_size"] = cfg.batch
            user["memory_budget_mb"] = round(cfg.memory_mb, 1)
    return config
