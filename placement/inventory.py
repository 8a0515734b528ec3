"""What the planner plans with: the cards a cluster has and the demand per model (the GPU
types are ``devices.catalog``'s).

Both are data (YAML), validated at the edge: a bad file raises ``PlacementInputError``
naming the file and the field (``nodes[1].gpus[0].count: Input should be greater than 0``).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from devices.catalog import (
    CATALOG_PATH,
    GpuType,
    catalog_name,
    gpu_types,
    local_gpu_type,
    parse_model,
    read_yaml,
)
from devices.catalog import DeviceInputError as PlacementInputError

__all__ = [
    "CATALOG_PATH",
    "Card",
    "Demand",
    "GpuType",
    "Inventory",
    "ModelDemand",
    "PlacementInputError",
    "discover_inventory",
    "gpu_types",
    "load_demand",
    "load_inventory",
    "local_gpu_type",
]


class GpuGroup(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: str = Field(description="A name from devices/gpu_types.yaml (e.g. A10).")
    count: int = Field(gt=0, le=64)

    @model_validator(mode="after")
    def _known_type(self) -> GpuGroup:
        if self.type not in gpu_types():
            raise ValueError(f"unknown GPU type {self.type!r}; known: {sorted(gpu_types())}")
        return self


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    gpus: list[GpuGroup] = Field(min_length=1)


class Inventory(BaseModel):
    """The cluster's cards, node by node (declared in YAML or discovered with pynvml)."""

    model_config = ConfigDict(extra="forbid")
    nodes: list[Node] = Field(min_length=1)

    def cards(self) -> list[Card]:
        """Every card, in node order; ``index`` is the card's position on its node."""
        out: list[Card] = []
        for node in self.nodes:
            index = 0
            for group in node.gpus:
                for _ in range(group.count):
                    out.append(Card(len(out), node.name, index, gpu_types()[group.type]))
                    index += 1
        return out


class Card:
    """One physical card: its id in the inventory, node, index on the node and type."""

    __slots__ = ("id", "index", "node", "type")

    def __init__(self, id: int, node: str, index: int, type: GpuType) -> None:
        self.id, self.node, self.index, self.type = id, node, index, type

    def __repr__(self) -> str:
        return f"Card({self.id}, {self.node}[{self.index}], {self.type.name})"


class ModelDemand(BaseModel):
    """Traffic one deployment must serve: rate (requests/s) and p99 latency target (ms)."""

    model_config = ConfigDict(extra="forbid")
    deployment: str = Field(min_length=1, description="The Serve deployment name (Etr).")
    profile: str = Field(min_length=1, description="profiles/<profile>/ holds its profiles.")
    rate_rps: float = Field(gt=0, description="Requests per second.")
    p99_ms: float = Field(gt=0, description="p99 latency target, ms (queueing included).")
    rows_per_request: int = Field(1, ge=1, description="Batch rows one request carries.")
    batch_wait_ms: float = Field(2.0, ge=0, description="How long a batch waits to fill.")
    burst_factor: float = Field(
        1.0, ge=1, le=10, description="Plan for rate x this (the peak of bursty traffic)."
    )


class Demand(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: list[ModelDemand] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> Demand:
        names = [m.deployment for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError(f"deployments listed twice: {sorted(names)}")
        return self


def load_inventory(path: Path) -> Inventory:
    return parse_model(Inventory, read_yaml(path), path)


def load_demand(path: Path) -> Demand:
    return parse_model(Demand, read_yaml(path), path)


def discover_inventory() -> Inventory:
    """The GPUs of every alive Ray node, read with pynvml by a task pinned to each node.

    Raises PlacementInputError when no node has a GPU pynvml can see.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    def gpus_here() -> list[str]:
        try:
            import pynvml

            pynvml.nvmlInit()
        except Exception:
            return []
        names = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            names.append(name.decode() if isinstance(name, bytes) else name)
        pynvml.nvmlShutdown()
        return names

    nodes = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        names = ray.get(gpus_here.options(scheduling_strategy=strategy).remote())
        groups: dict[str, int] = {}
        for name in names:
            groups[catalog_name(name)] = groups.get(catalog_name(name), 0) + 1
        if groups:
            gpus = [{"type": t, "count": n} for t, n in groups.items()]
            nodes.append({"name": node["NodeManagerAddress"], "gpus": gpus})
    if not nodes:
        raise PlacementInputError("no Ray node reports a GPU through pynvml")
    return parse_model(Inventory, {"nodes": nodes}, Path("<discovered>"))
