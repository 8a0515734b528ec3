"""deploy.yaml is a valid Serve config, and the README's operator commands deploy it."""

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

from serve_app.config import DispatchAppArgs, ResilienceArgs
from serve_app.ops.local import free_ports

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
    from serve_app.ops.drill import FAST_RECOVERY

    raw = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    app = raw["applications"][0]
    by_name = {d["name"]: d for d in app["deployments"]}
    for name in ("OrSolver", "Etr"):
        assert {k: by_name[name][k] for k in FAST_RECOVERY} == FAST_RECOVERY
    resilience = app["args"]["resilience"]
    assert resilience["fault_injection"] is False
    # The drill runs ResilienceArgs' default hold: the shipped one is the one measured.
    assert resilience["health_hold_s"] == ResilienceArgs().health_hold_s


def test_a_held_health_check_ends_before_serve_gives_up_on_it():
    """A check held at a replica that trips ends with the process (a crash, acted on at once)
    only if the hold and the exit grace fit in health_check_timeout_s; past it Serve counts a
    timed-out check, one failure of three. A hung probe must trip the guard before that too."""
    from actors.device import EXIT_GRACE_S

    app = yaml.safe_load((ROOT / "deploy.yaml").read_text())["applications"][0]
    resilience = DispatchAppArgs(**app["args"]).resilience
    for d in app["deployments"]:
        if d["name"] in ("OrSolver", "Etr"):
            timeout = d["health_check_timeout_s"]
            assert resilience.health_hold_s + EXIT_GRACE_S < timeout, d["name"]
            assert resilience.probe_timeout_s < timeout, d["name"]


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
