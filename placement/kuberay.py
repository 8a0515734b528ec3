"""A KubeRay ``RayService`` manifest from a Serve config (deploy.yaml, or ``orml plan``'s output).

The Serve config goes in whole as ``serveConfigV2``: KubeRay deploys it on the cluster it
starts, and rolls a changed one (a new ``user_config``, ``orml models load``) in place. The Ray
cluster around it:

* a head pod: GCS, dashboard, Serve's controller and proxy, no replicas (``num-cpus: 0``);
* a CPU worker group for the deployments that ask no GPU, sized by their CPUs at most replicas;
* one worker group per GPU type the deployments ask for (``ray_actor_options.accelerator_type``,
  which ``orml plan`` writes): its pods go to nodes with that card by NVIDIA GPU Feature
  Discovery's ``nvidia.com/gpu.product`` label (``devices/gpu_types.yaml``: ``gpu_product``),
  take ``nvidia.com/gpu`` cards each and tolerate the GPU nodes' taint. Ray detects the card in
  the pod and sets the ``accelerator_type:<T>`` resource the replicas are scheduled by. The
  group has as many pods as the deployments need whole cards (replicas x ``num_gpus``, summed
  per type and rounded up), ``gpus_per_pod`` cards each.

Every pod gets the environment ``orml serve`` gives its local Ray (``ops.local``), the
secrets of ``SECRET_ENV`` from a Secret when one is named, and ``CAP_SYS_NICE`` (HAProxy and
the Ingress replicas raise their CPU priority above the other replicas').
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from config import environment
from devices.catalog import gpu_types

#: The keys of a Secret the pods read their secrets from (all optional in the Secret):
#: deploy/production.yaml's header says what each is.
SECRET_ENV = (
    "ORML_REDIS_URL",  # config.Settings.redis_url
    environment.REDIS_PASSWORD.name,
    environment.API_TOKENS.name,
    environment.CACHE_SECRET.name,
)
#: The container ports of the head pod (KubeRay's names: its services find them by these).
HEAD_PORTS = {"gcs-server": 6379, "dashboard": 8265, "client": 10001, "serve": 8000}


class RayServiceOptions(BaseModel):
    """What the manifest needs beyond the Serve config."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field("orml", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=50)
    namespace: str | None = None
    image: str = Field(description="An image with Ray and this package installed.")
    ray_version: str = Field(description="The Ray version in the image.")
    gpus_per_pod: int = Field(1, ge=1, le=8)
    worker_cpus: int = Field(4, ge=1, description="CPUs of each worker pod.")
    worker_memory_gi: int = Field(16, ge=1)
    head_cpus: int = Field(2, ge=1)
    head_memory_gi: int = Field(8, ge=1)
    secret: str | None = Field(None, description=f"A Secret with keys among {SECRET_ENV}.")
    env: dict[str, str] = Field(default_factory=dict, description="Every Ray process's env.")


def _needs(serve_config: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """(CPUs of the CPU-only replicas, GPUs per accelerator type), at most replicas each."""
    cpus, gpus = 0.0, defaultdict(float)
    for app in serve_config.get("applications", []):
        for d in app.get("deployments", []):
            scaling = d.get("autoscaling_config") or {}
            replicas = scaling.get("max_replicas", d.get("num_replicas", 1))
            options = d.get("ray_actor_options") or {}
            num_gpus = float(options.get("num_gpus", 0))
            if num_gpus > 0:
                gpus[options.get("accelerator_type") or "any"] += replicas * num_gpus
            else:
                cpus += replicas * float(options.get("num_cpus", 1))
    return cpus, dict(gpus)


def _container(name: str, o: RayServiceOptions, cpus: int, memory_gi: int) -> dict[str, Any]:
    limits: dict[str, Any] = {"cpu": str(cpus), "memory": f"{memory_gi}Gi"}
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(o.env.items())]
    if o.secret:
        env += [
            {
                "name": key,
                "valueFrom": {"secretKeyRef": {"name": o.secret, "key": key, "optional": True}},
            }
            for key in SECRET_ENV
        ]
    return {
        "name": name,
        "image": o.image,
        "resources": {"limits": limits, "requests": dict(limits)},
        "env": env,
        # Lets HAProxy and the Ingress replicas run a few niceness steps above Ray's workers
        # (ops/haproxy_config.py, actors/cpu_priority.py); nothing else of the pod's changes.
        "securityContext": {"capabilities": {"add": ["SYS_NICE"]}},
    }


def _gpu_group(accelerator: str, cards: float, o: RayServiceOptions) -> dict[str, Any]:
    by_ray_name = {t.ray_accelerator: t for t in gpu_types().values() if t.ray_accelerator}
    pods = math.ceil(math.ceil(cards - 1e-9) / o.gpus_per_pod)
    container = _container("ray-worker", o, o.worker_cpus, o.worker_memory_gi)
    for side in ("limits", "requests"):
        container["resources"][side]["nvidia.com/gpu"] = str(o.gpus_per_pod)
    spec: dict[str, Any] = {
        "containers": [container],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    gpu = by_ray_name.get(accelerator)
    if gpu is not None and gpu.gpu_product:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": gpu.gpu_product}
    elif accelerator != "any":
        raise ValueError(f"accelerator_type {accelerator!r} is not in devices/gpu_types.yaml")
    return {
        "groupName": f"gpu-{accelerator.lower()}",
        "replicas": pods,
        "minReplicas": pods,
        "maxReplicas": pods,
        "rayStartParams": {},
        "template": {"spec": spec},
    }


def rayservice(serve_config: dict[str, Any], options: RayServiceOptions) -> dict[str, Any]:
    """The RayService manifest (a dict, ``yaml.safe_dump`` it) for ``serve_config``.

    Raises ValueError for an accelerator type the GPU catalogue does not know."""
    o = options
    cpus, gpus = _needs(serve_config)
    head = _container("ray-head", o, o.head_cpus, o.head_memory_gi)
    head["ports"] = [{"name": n, "containerPort": p} for n, p in HEAD_PORTS.items()]
    grpc_port = (serve_config.get("grpc_options") or {}).get("port")
    if grpc_port:
        head["ports"].append({"name": "serve-grpc", "containerPort": int(grpc_port)})
    cpu_pods = max(1, math.ceil(cpus / o.worker_cpus))
    cpu_worker = _container("ray-worker", o, o.worker_cpus, o.worker_memory_gi)
    workers = [
        {
            "groupName": "cpu",
            "replicas": 1,
            "minReplicas": 1,
            "maxReplicas": cpu_pods,
            "rayStartParams": {},
            "template": {"spec": {"containers": [cpu_worker]}},
        }
    ]
    workers += [_gpu_group(acc, cards, o) for acc, cards in sorted(gpus.items())]
    metadata: dict[str, Any] = {"name": o.name, "labels": {"app.kubernetes.io/name": "orml-serve"}}
    if o.namespace:
        metadata["namespace"] = o.namespace
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": metadata,
        "spec": {
            "serveConfigV2": yaml.safe_dump(serve_config, sort_keys=False, width=1000),
            "rayClusterConfig": {
                "rayVersion": o.ray_version,
                "enableInTreeAutoscaling": True,
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
                    "template": {"spec": {"containers": [head]}},
                },
                "workerGroupSpecs": workers,
            },
        },
    }


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks: serveConfigV2 reads as the YAML it is."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_BlockDumper.add_representer(str, _str)


def to_yaml(manifest: dict[str, Any]) -> str:
    """The manifest as YAML, serveConfigV2 as a block."""
    return yaml.dump(manifest, Dumper=_BlockDumper, sort_keys=False, width=100)
