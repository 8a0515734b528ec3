"""deploy.yaml and deploy/production.yaml are valid Serve configs (production = deploy.yaml with
every endpoint but health behind API keys, no secret in either), and the README's operator
commands deploy them."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from ops.ports import free_ports
from serve_app.config import DispatchAppArgs, ResilienceArgs

ROOT = Path(__file__).resolve().parents[2]


def test_deploy_yaml_validates_against_serve_schema():
    from ray.serve.schema import ServeDeploySchema

    raw = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    schema = ServeDeploySchema.model_validate(raw)
    app = schema.applications[0]
    assert app.import_path == "serve_app.builder:app_builder"
    DispatchAppArgs(**app.args)  # the builder's typed args accept them
    names = {d["name"] if isinstance(d, dict) else d.name for d in app.deployments}
    assert names == {"Ingress", "OrSolver", "Etr"}


def test_deploy_yaml_uses_the_drilled_recovery_settings():
    """The numbers bench/recovery.py measured are the ones deploy.yaml ships."""
    from ops.drill import FAST_RECOVERY

    raw = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    app = raw["applications"][0]
    by_name = {d["name"]: d for d in app["deployments"]}
    for name in ("OrSolver", "Etr"):
        assert {k: by_name[name][k] for k in FAST_RECOVERY} == FAST_RECOVERY
    guard = app["args"]["resilience"]["replicas"]
    assert guard["fault_injection"] is False
    # The drill runs ResilienceArgs' default hold: the shipped one is the one measured.
    assert guard["health_hold_s"] == ResilienceArgs().replicas.health_hold_s


def test_a_held_health_check_ends_before_serve_gives_up_on_it():
    """A check held at a replica that trips ends with the process (a crash, acted on at once)
    only if the hold and the exit grace fit in health_check_timeout_s; past it Serve counts a
    timed-out check, one failure of three. A hung probe must trip the guard before that too."""
    from actors.device import EXIT_GRACE_S

    app = yaml.safe_load((ROOT / "deploy.yaml").read_text())["applications"][0]
    guard = DispatchAppArgs(**app["args"]).resilience.replicas
    for d in app["deployments"]:
        if d["name"] in ("OrSolver", "Etr"):
            timeout = d["health_check_timeout_s"]
            assert guard.health_hold_s + EXIT_GRACE_S < timeout, d["name"]
            assert guard.probe_timeout_s < timeout, d["name"]


CONFIGS = ("deploy.yaml", "deploy/production.yaml")


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / name).read_text())


def test_production_is_deploy_yaml_with_every_endpoint_but_health_protected():
    from serve_app.pipeline.api_keys import ENDPOINTS

    base, production = load("deploy.yaml"), load("deploy/production.yaml")
    auth = production["applications"][0]["args"]["auth"]
    assert sorted(auth["protected"]) == sorted(ENDPOINTS)
    base["applications"][0]["args"]["auth"]["protected"] = auth["protected"]
    assert production == base  # nothing else differs: one config, one overlay


@pytest.mark.parametrize("name", CONFIGS)
def test_configs_validate_and_hold_no_secret(name):
    from ray.serve.schema import ServeDeploySchema

    raw = load(name)
    app = ServeDeploySchema.model_validate(raw).applications[0]
    args = DispatchAppArgs(**app.args)
    assert args.cache.redis_url is None and args.admission.priority_key is None
    assert args.auth.tokens_env == "ORML_API_TOKENS"
    assert args.cache.seal_secret_env == "ORML_CACHE_SECRET"


@pytest.mark.parametrize("name", CONFIGS)
def test_the_ingress_grpc_transport_is_capped_at_the_body_limit(name):
    """Serve's gRPC servers take 2 GiB messages unless told otherwise, read at process start:
    each config sets the ingress's cap to its own limits.max_body_bytes."""
    from serve_app.grpc_api.cap import GRPC_CAP_ENV

    app = load(name)["applications"][0]
    ingress = next(d for d in app["deployments"] if d["name"] == "Ingress")
    cap = ingress["ray_actor_options"]["runtime_env"]["env_vars"][GRPC_CAP_ENV]
    assert int(cap) == DispatchAppArgs(**app["args"]).limits.max_body_bytes


def test_a_password_in_the_config_is_refused_without_echoing_it():
    with pytest.raises(ValueError, match="ORML_REDIS_PASSWORD") as err:
        DispatchAppArgs(cache={"redis_url": "redis://:hunter2-secret@cache:6379/0"})
    assert "hunter2" not in str(err.value)
    DispatchAppArgs(cache={"redis_url": "rediss://cache:6379/0"})  # no password: fine


def test_bad_app_args_name_the_field():
    with pytest.raises(ValueError, match="max_riders"):
        DispatchAppArgs(limits={"max_riders": 0})
    with pytest.raises(ValueError, match="surprise"):
        DispatchAppArgs(surprise=1)


@pytest.mark.slow
def test_operator_commands_deploy_and_serve(tmp_path):
    """ray start --head (non-default port) + serve deploy deploy.yaml + a real request."""
    names = ("gcs", "dash", "http", "agent", "agent_grpc", "client", "runtime_env", "metrics")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    config = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    config["http_options"]["port"] = ports["http"]
    config["http_options"]["host"] = "127.0.0.1"
    cfg = tmp_path / "deploy.yaml"
    cfg.write_text(yaml.safe_dump(config))
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    bin_dir = Path(sys.executable).parent
    head = subprocess.Popen(
        [
            str(bin_dir / "ray"),
            "start",
            "--head",
            "--block",
            f"--port={ports['gcs']}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={ports['dash']}",
            f"--dashboard-agent-listen-port={ports['agent']}",
            f"--dashboard-agent-grpc-port={ports['agent_grpc']}",
            f"--ray-client-server-port={ports['client']}",
            f"--runtime-env-agent-port={ports['runtime_env']}",
            f"--metrics-export-port={ports['metrics']}",
            "--num-cpus=2",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"http://127.0.0.1:{ports['dash']}"
    try:
        deadline = time.monotonic() + 120
        while True:
            deploy = subprocess.run(
                [str(bin_dir / "serve"), "deploy", str(cfg), "-a", address],
                env=env,
                capture_output=True,
                text=True,
            )
            if deploy.returncode == 0:
                break
            assert time.monotonic() < deadline, deploy.stderr[-2000:]
            time.sleep(2)
        body = json.loads(
            subprocess.run(
                [str(bin_dir / "orml"), "example", "dispatch", "--riders", "20", "--orders", "5"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        deadline = time.monotonic() + 180
        while True:
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{ports['http']}/v1/dispatch", json=body, timeout=30
                )
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "app never answered"
            time.sleep(2)
        assert len(r.json()["assignments"]) + len(r.json()["unassigned"]) == 5
    finally:
        os.killpg(head.pid, signal.SIGINT)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
