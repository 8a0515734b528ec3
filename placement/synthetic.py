"""Seeded, plausible model zoos, inventories and demands for the benchmark and property tests.

A synthetic model is profiled (as an estimate, flagged) on the A10 and scaled to other types by
``devices.profiles``' rule: weights 0.5-6 GiB, workspace 0.1-1 GiB, activations 0.2-8 MiB
per row, latency(b) = fixed 0.3-3 ms + per-row cost x b^0.85 (batching amortises the fixed
part), p99 = 1.3 x p50.
"""

from __future__ import annotations

import random

from devices.profiles import ModelProfile, ProfilePoint, ProfileSet
from placement.inventory import Demand, Inventory, gpu_types

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)


def model_zoo(n: int, seed: int = 0) -> ProfileSet:
    rng = random.Random(seed)
    profiles = []
    for k in range(n):
        fixed = rng.uniform(0.3, 3.0)
        per_row = rng.uniform(0.02, 0.5)
        points = [
            ProfilePoint(
                batch=b,
                p50_ms=fixed + per_row * b**0.85,
                p99_ms=1.3 * (fixed + per_row * b**0.85),
            )
            for b in BATCHES
        ]
        profiles.append(
            ModelProfile(
                model=f"m{k:02d}",
                device_type="A10",
                runtime="synthetic",
                estimate=True,
                basis="synthetic (placement.synthetic)",
                context_mb=float(gpu_types()["A10"].context_mb),
                weights_mb=rng.uniform(512, 6144),
                workspace_mb=rng.uniform(100, 1024),
                per_row_kb=rng.uniform(200, 8192),
                points=points,
            )
        )
    return ProfileSet(profiles)


def demand_mix(
    zoo: ProfileSet, seed: int = 0, scale: float = 1.0, burst_factor: float = 1.0
) -> Demand:
    """Every zoo model with a rate drawn from 20 to 400 requests a second (x ``scale``) and a
    p99 target 3-10x its A10 latency at batch 1 (some tight, some loose)."""
    rng = random.Random(seed)
    models = []
    for name in sorted(zoo.models()):
        base = zoo.get(name, "A10").latency_ms(1, "p99")
        models.append(
            {
                "deployment": name,
                "profile": name,
                "rate_rps": round(rng.uniform(20, 400) * scale, 1),
                "p99_ms": round(base * rng.uniform(3, 10) + 2.0, 2),
                "burst_factor": burst_factor,
            }
        )
    return Demand.model_validate({"models": models})


def mixed_inventory(counts: dict[str, int] | None = None, per_node: int = 4) -> Inventory:
    """Nodes of ``per_node`` cards of one type; default 4x T4, 4x A10, 2x A100-80GB, 1x H100."""
    counts = counts or {"T4": 4, "A10": 4, "A100-80GB": 2, "H100": 1}
    nodes = []
    for gpu, count in counts.items():
        for k in range(0, count, per_node):
            nodes.append(
                {
                    "name": f"{gpu.lower()}-{k // per_node}",
                    "gpus": [{"type": gpu, "count": min(per_node, count - k)}],
                }
            )
    return Inventory.model_validate({"nodes": nodes})
