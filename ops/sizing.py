"""Fit a Serve config to the machine it starts on (what ``orml serve`` does before deploying).

deploy.yaml is written for a cluster: its minimum replicas may ask for more CPUs than a laptop
has, and its autoscaling maxima for far more. Replicas Ray cannot place stay PENDING forever
(and make shutdown wait for them). So, given the CPUs and GPUs Ray sees:

* if the minimum replicas' CPUs exceed the machine, every deployment's ``num_cpus`` is scaled
  down by one factor (Ray's CPUs are logical: a share is a scheduling weight, not a limit);
* each autoscaled deployment's ``max_replicas`` is cut so that, all at their maximum, the
  replicas still fit;
* GPU requests the machine cannot meet are dropped (the code falls back to the CPU backends).

Each change is reported as a note. Pure: a config dict in, a new one out.
"""

from __future__ import annotations

import copy
import math
from typing import Any

#: CPUs kept free for Ray's own processes and the proxy.
HEADROOM_CPUS = 0.1


def _replicas(d: dict[str, Any]) -> tuple[int, int]:
    """(minimum, maximum) replicas of a deployment entry."""
    auto = d.get("autoscaling_config")
    if auto:
        return int(auto.get("min_replicas", 1)), int(auto.get("max_replicas", 1))
    n = int(d.get("num_replicas", 1))
    return n, n


def fit_to_machine(
    config: dict[str, Any], cpus: float, gpus: float = 0.0
) -> tuple[dict[str, Any], list[str]]:
    """A copy of the Serve ``config`` whose replicas fit ``cpus`` and ``gpus``, and notes."""
    config = copy.deepcopy(config)
    notes: list[str] = []
    budget = max(cpus - HEADROOM_CPUS, 0.1)
    deployments = [d for app in config.get("applications", []) for d in app.get("deployments", [])]

    def cpu(d: dict[str, Any]) -> float:
        return float(d.setdefault("ray_actor_options", {}).get("num_cpus", 1.0))

    gpu_min = sum(
        float(d.get("ray_actor_options", {}).get("num_gpus", 0)) * _replicas(d)[0]
        for d in deployments
    )
    if gpu_min > gpus:
        for d in deployments:
            options = d.get("ray_actor_options", {})
            if options.pop("num_gpus", None) is not None:
                options.pop("accelerator_type", None)
                notes.append(f"{d['name']}: no GPU to give it here (Ray sees {gpus:g}): CPU")
    minimum = sum(cpu(d) * _replicas(d)[0] for d in deployments)
    if minimum > budget:
        factor = budget / minimum
        for d in deployments:
            d["ray_actor_options"]["num_cpus"] = round(cpu(d) * factor, 4)
        notes.append(
            f"minimum replicas need {minimum:g} CPUs, Ray sees {cpus:g}: num_cpus x {factor:.2f}"
        )
        minimum = sum(cpu(d) * _replicas(d)[0] for d in deployments)
    spare = budget - minimum
    scaled = [d for d in deployments if d.get("autoscaling_config")]
    wanted = {d["name"]: (_replicas(d)[1] - _replicas(d)[0]) * cpu(d) for d in scaled}
    total_wanted = sum(wanted.values())
    if total_wanted > spare + 1e-9:
        for d in scaled:
            low, high = _replicas(d)
            share = spare * wanted[d["name"]] / total_wanted if total_wanted else 0.0
            extra = math.floor(share / cpu(d) + 1e-9) if cpu(d) > 0 else high - low
            new_high = max(low, min(high, low + extra))
            if new_high != high:
                d["autoscaling_config"]["max_replicas"] = new_high
                notes.append(f"{d['name']}: max_replicas {high} -> {new_high} to fit {cpus:g} CPUs")
    return config, notes
