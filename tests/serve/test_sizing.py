"""``orml serve`` fits deploy.yaml to the machine: minimum replicas scheduled, maxima that fit,
no GPU asked of a machine without one."""

from __future__ import annotations

from pathlib import Path

import yaml

from ops.sizing import HEADROOM_CPUS, _replicas, fit_to_machine

ROOT = Path(__file__).resolve().parents[2]


def demand(config, which: int) -> float:
    return sum(
        d["ray_actor_options"]["num_cpus"] * _replicas(d)[which]
        for app in config["applications"]
        for d in app["deployments"]
    )


def test_deploy_yaml_fits_a_two_core_machine_at_minimum_and_at_maximum():
    config = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    fitted, notes = fit_to_machine(config, cpus=2)
    assert demand(fitted, 0) <= 2 - HEADROOM_CPUS + 1e-9
    assert demand(fitted, 1) <= 2 - HEADROOM_CPUS + 1e-9
    assert notes  # it said what it changed
    assert config == yaml.safe_load((ROOT / "deploy.yaml").read_text())  # input untouched


def test_a_big_machine_keeps_the_config_as_written():
    config = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    fitted, notes = fit_to_machine(config, cpus=64)
    assert fitted == config and notes == []


def test_gpu_requests_are_dropped_where_ray_sees_no_gpu():
    options = {"num_cpus": 0.5, "num_gpus": 0.5, "accelerator_type": "T4"}
    etr = {"name": "Etr", "num_replicas": 1, "ray_actor_options": options}
    config = {"applications": [{"deployments": [etr]}]}
    fitted, notes = fit_to_machine(config, cpus=4, gpus=0)
    options = fitted["applications"][0]["deployments"][0]["ray_actor_options"]
    assert "num_gpus" not in options and "accelerator_type" not in options
    assert "Etr" in notes[0]
    kept, _ = fit_to_machine(config, cpus=4, gpus=1)
    assert kept == config
