"""The configuration reference page is the models' own: regenerated, it is the committed page;
every key of the shipped Serve configs and every ORML_* variable the code names is on it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ops.config_reference import environment_rows, page, serve_config_rows

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "configuration.md"
PACKAGES = [
    "actors",
    "cache",
    "cli",
    "config",
    "devices",
    "domain",
    "etr",
    "fleet",
    "kernels",
    "ops",
    "placement",
    "planner",
    "serve_app",
]


def key_paths(node: object, prefix: str = "") -> set[str]:
    """Every key path of a YAML document, lists of objects as ``key[]``; the free-form maps
    (``runtime_env``, ``*_kwargs``) are not walked into."""
    out: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}{key}"
            out.add(path)
            if key in ("runtime_env", "policy_kwargs", "request_router_kwargs"):
                continue
            out |= key_paths(value, f"{path}.")
    elif isinstance(node, list):
        for item in node:
            out |= key_paths(item, prefix[:-1] + "[].")
    return out


def test_the_committed_page_is_what_the_models_generate():
    """Whole where Ray is the version the page was made with; else our own rows (Ray's
    descriptions are Ray's to change)."""
    import ray

    committed, fresh = PAGE.read_text(), page()
    if f"from Ray {ray.__version__})" in committed:
        assert committed == fresh, "run: python -m ops.config_reference > " + str(PAGE)
        return
    ours = [
        line
        for line in fresh.splitlines()
        if line.startswith(
            ("| `ORML_", "| `applications[].args", "| `applications[].deployments[].user_config")
        )
    ]
    assert set(ours) <= set(committed.splitlines())


def test_every_key_of_the_shipped_configs_is_documented():
    documented = {row[0] for row in serve_config_rows()}
    for config in ("deploy.yaml", "deploy/production.yaml"):
        paths = key_paths(yaml.safe_load((ROOT / config).read_text()))
        assert paths - documented == set(), config


def test_every_orml_variable_the_code_names_is_documented():
    named = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            named |= set(re.findall(r"\bORML_[A-Z][A-Z_]*[A-Z]\b", path.read_text()))
    documented = {row[0] for row in environment_rows()}
    assert named - documented == set()
