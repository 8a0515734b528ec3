"""``orml k8s rayservice``: the RayService manifest from deploy.yaml or a placement plan.

What is validated here, against real schemas: ``serveConfigV2`` with Ray's own
``ServeDeploySchema`` (what KubeRay's Serve deploy takes), and every pod template with the
Kubernetes API's strict OpenAPI schema for ``core/v1 PodTemplateSpec`` (kubernetes-validate,
unknown fields refused). The RayService CRD's own schema is used when it is vendored at
``deploy/kuberay/ray.io_rayservices.yaml`` (it is not on any registry this project builds
from; the test says so when it skips)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from placement.inventory import gpu_types
from placement.kuberay import RayServiceOptions, rayservice, to_yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = yaml.safe_load((ROOT / "deploy.yaml").read_text())
OPTIONS = RayServiceOptions(image="registry.example/orml-serve:0.1.0", ray_version="2.60.0")
CRD = ROOT / "deploy/kuberay/ray.io_rayservices.yaml"


def orml(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )


def planned(tmp_path: Path) -> dict:
    """deploy.yaml as `orml plan` rewrites it for the example inventory and demand."""
    out = tmp_path / "planned.yaml"
    orml(
        "plan",
        "-o",
        str(out),
        "--inventory",
        "examples/placement/inventory.yaml",
        "--demand",
        "examples/placement/demand.yaml",
    )
    return yaml.safe_load(out.read_text())


def pod_templates(manifest: dict) -> list[dict]:
    cluster = manifest["spec"]["rayClusterConfig"]
    return [cluster["headGroupSpec"]["template"]] + [
        g["template"] for g in cluster["workerGroupSpecs"]
    ]


def test_serve_config_goes_in_whole_and_is_a_valid_serve_deploy_config():
    from ray.serve.schema import ServeDeploySchema

    manifest = yaml.safe_load(to_yaml(rayservice(DEPLOY, OPTIONS)))
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", "RayService")
    serve_config = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    assert serve_config == DEPLOY
    ServeDeploySchema.model_validate(serve_config)


def test_every_pod_template_is_a_valid_kubernetes_pod_template(tmp_path):
    version = kubernetes_validate.latest_version()
    for config in (DEPLOY, planned(tmp_path)):
        manifest = rayservice(config, OPTIONS.model_copy(update={"secret": "orml-secrets"}))
        for template in pod_templates(manifest):
            doc = {
                "apiVersion": "v1",
                "kind": "PodTemplate",
                "metadata": {"name": "t"},
                "template": template,
            }
            kubernetes_validate.validate(doc, version, strict=True)
            for container in template["spec"]["containers"]:  # HAProxy, the Ingress: raise
                assert container["securityContext"]["capabilities"]["add"] == ["SYS_NICE"]
    bad = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
    bad["template"] = {"spec": {"containers": [{"name": "x", "image": "i", "gpus": 1}]}}
    with pytest.raises(kubernetes_validate.ValidationError):  # the check does refuse
        kubernetes_validate.validate(bad, version, strict=True)


def test_the_plans_gpu_types_become_node_selectors_and_gpu_limits(tmp_path):
    config = planned(tmp_path)
    manifest = rayservice(config, OPTIONS.model_copy(update={"gpus_per_pod": 1}))
    wanted: dict[str, float] = {}
    for d in config["applications"][0]["deployments"]:
        options = d.get("ray_actor_options", {})
        if options.get("num_gpus"):
            acc = options["accelerator_type"]
            wanted[acc] = wanted.get(acc, 0) + d["num_replicas"] * options["num_gpus"]
    assert wanted, "the example plan places replicas on GPUs"
    groups = {g["groupName"]: g for g in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]}
    by_ray = {t.ray_accelerator: t for t in gpu_types().values()}
    for acc, cards in wanted.items():
        group = groups[f"gpu-{acc.lower()}"]
        spec = group["template"]["spec"]
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": by_ray[acc].gpu_product}
        assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert group["replicas"] == group["maxReplicas"] == -(-round(cards, 6) // 1)
    assert set(groups) == {"cpu"} | {f"gpu-{a.lower()}" for a in wanted}


def test_an_accelerator_the_catalogue_does_not_know_is_refused():
    config = yaml.safe_load(yaml.safe_dump(DEPLOY))
    etr = next(d for d in config["applications"][0]["deployments"] if d["name"] == "Etr")
    etr["ray_actor_options"] = {"num_gpus": 0.5, "accelerator_type": "TPU-v9"}
    with pytest.raises(ValueError, match="TPU-v9"):
        rayservice(config, OPTIONS)


def test_the_cli_writes_the_same_manifest(tmp_path):
    out = tmp_path / "rayservice.yaml"
    orml("k8s", "rayservice", "--image", OPTIONS.image, "--ray-version", "2.60.0", "-o", str(out))
    got = yaml.safe_load(out.read_text())  # from deploy/production.yaml, the default
    production = yaml.safe_load((ROOT / "deploy/production.yaml").read_text())
    want = rayservice(production, OPTIONS)
    assert got["spec"]["serveConfigV2"] == want["spec"]["serveConfigV2"]
    assert got["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["groupName"] == "cpu"
    env = got["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {"name": "RAY_SERVE_COLLECT_AUTOSCALING_METRICS_ON_HANDLE", "value": "0"} in env["env"]
    assert {"name": "RAY_metrics_report_interval_ms", "value": "2000"} in env["env"]


def test_the_manifest_validates_against_the_rayservice_crd(tmp_path):
    """Against KubeRay's own CRD (vendored with its provenance: deploy/kuberay/README.md)."""
    import jsonschema

    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema = version["schema"]["openAPIV3Schema"]
    for config in (DEPLOY, planned(tmp_path)):
        jsonschema.validate(rayservice(config, OPTIONS), schema)
    broken = rayservice(DEPLOY, OPTIONS)
    broken["spec"]["serveConfigV2"] = {"applications": []}  # must be the config as a string
    with pytest.raises(jsonschema.ValidationError, match=r"is not of type"):
        jsonschema.validate(broken, schema)
