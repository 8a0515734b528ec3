"""``orml models list|load|unload``: ETR versions in the repository and on a running app.

Triton's explicit model control, on Ray Serve's terms: the version an app serves is data in the
config the cluster runs (the Etr deployment's ``user_config``: ``model_version`` and
``warm_versions``, see ``actors.etr_batcher.EtrUserConfig``). A roll reads that config back
through the dashboard's Serve REST API (what ``serve config`` shows), changes those two
fields and deploys it again (what ``serve deploy`` does). Serve applies a user_config change
in place: each replica's ``reconfigure`` loads the new version beside the old one and swaps,
no replica restarts and no request is dropped. ``load`` keeps the version it replaces warm,
so rolling back is a swap; ``unload`` frees a warm version.

Only applications deployed from a config (``orml serve``, ``serve deploy``, KubeRay) can be
rolled so; one deployed from Python is refused with a message saying so.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config.secrets import read_env, read_secret
from etr.repository import DEFAULT_ROOT, versions

DEPLOYMENT = "Etr"
DEFAULT_ADDRESS = "http://127.0.0.1:8265"


class ModelsError(Exception):
    """A request the CLI refuses, with the reason (exit status 2)."""


# ---- the repository -------------------------------------------------------------------------
def repository(root: Path = DEFAULT_ROOT) -> list[dict[str, Any]]:
    """One row per version under ``root/etr``, oldest first: version, test MAE (minutes),
    parameters, seed and the ONNX file's sha256 (first 12 hex digits)."""
    rows = []
    for version in versions("etr", root):
        meta = json.loads((root / "etr" / version / "metadata.json").read_text())
        rows.append(
            {
                "version": version,
                "test_mae_min": meta["test_metrics_minutes"]["model"]["mae"],
                "parameters": meta["parameters"],
                "seed": meta.get("seed"),
                "sha256": meta["sha256"][:12],
            }
        )
    return rows


# ---- the running config ---------------------------------------------------------------------
def running_config(details: dict[str, Any]) -> dict[str, Any]:
    """The config the cluster runs, as ``serve deploy`` takes it, from the Serve REST API's
    ``GET /api/serve/applications/`` answer. ModelsError when an application has no config
    (it was deployed from Python)."""
    apps = []
    for name, app in details.get("applications", {}).items():
        if app.get("deployed_app_config") is None:
            raise ModelsError(
                f"application {name!r} was deployed from Python (serve.run), not from a "
                "config: roll it there, with the Etr deployment's user_config"
            )
        apps.append(app["deployed_app_config"])
    config: dict[str, Any] = {
        "proxy_location": details.get("proxy_location"),
        "http_options": details.get("http_options"),
        "grpc_options": details.get("grpc_options"),
        "applications": apps,
    }
    if details.get("target_capacity") is not None:
        config["target_capacity"] = details["target_capacity"]
    return {k: v for k, v in config.items() if v is not None}


def etr_app(details: dict[str, Any], app: str | None) -> str:
    """The application to act on: ``app``, or the only one with an Etr deployment."""
    have = [n for n, a in details.get("applications", {}).items() if DEPLOYMENT in a["deployments"]]
    if app is not None:
        if app not in have:
            raise ModelsError(f"no application {app!r} with {DEPLOYMENT}; have {have}")
        return app
    if len(have) != 1:
        raise ModelsError(f"{len(have)} applications with an {DEPLOYMENT} deployment: pass --app")
    return have[0]


def served(details: dict[str, Any], app: str) -> dict[str, Any]:
    """What the app's Etr deployment runs now: model_version (None: the newest at load),
    warm_versions, its status and replica count."""
    dep = details["applications"][app]["deployments"][DEPLOYMENT]
    user = dep.get("deployment_config", {}).get("user_config") or {}
    return {
        "model_version": user.get("model_version"),
        "warm_versions": list(user.get("warm_versions", [])),
        "status": dep["status"],
        "replicas": len(dep.get("replicas", [])),
    }


def _etr_user_config(config: dict[str, Any], app: str) -> dict[str, Any]:
    target = next(a for a in config["applications"] if a["name"] == app)
    deployments = target.setdefault("deployments", [])
    dep = next((d for d in deployments if d["name"] == DEPLOYMENT), None)
    if dep is None:
        dep = {"name": DEPLOYMENT}
        deployments.append(dep)
    user = dep.get("user_config")
    if user is None:
        user = dep["user_config"] = {}
    return user


def with_loaded(
    config: dict[str, Any], app: str, version: str, keep_previous: bool = True
) -> dict[str, Any]:
    """``config`` with ``version`` serving in ``app``; the version it replaces stays warm when
    ``keep_previous`` (so rolling back swaps without a load). A new dict."""
    config = copy.deepcopy(config)
    user = _etr_user_config(config, app)
    previous = user.get("model_version")
    warm = [v for v in user.get("warm_versions", []) if v != version]
    if keep_previous and previous is not None and previous != version and previous not in warm:
        warm.append(previous)
    user["model_version"] = version
    user["warm_versions"] = warm
    return config


def with_unloaded(config: dict[str, Any], app: str, version: str) -> dict[str, Any]:
    """``config`` without ``version`` among the warm ones. ModelsError for the serving version
    or one not loaded. A new dict."""
    config = copy.deepcopy(config)
    user = _etr_user_config(config, app)
    if user.get("model_version") == version:
        raise ModelsError(f"version {version!r} is serving: load another version first")
    warm = user.get("warm_versions", [])
    if version not in warm:
        raise ModelsError(f"version {version!r} is not loaded (warm: {warm})")
    user["warm_versions"] = [v for v in warm if v != version]
    return config


# ---- talking to the cluster -----------------------------------------------------------------
def cluster_token() -> str | None:
    """The cluster's auth token where Ray keeps it: $RAY_AUTH_TOKEN, the file
    $RAY_AUTH_TOKEN_PATH names, or ~/.ray/auth_token (None: none here)."""
    path = Path(read_env("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    return read_secret("RAY_AUTH_TOKEN", path if path.is_file() else None)


def client(address: str | None):
    """Ray's own Serve REST client (what ``serve deploy`` uses), sending the cluster's token:
    the dashboard asks for one (Ray's client sends it only when told that auth is on)."""
    from ray.dashboard.modules.serve.sdk import ServeSubmissionClient

    token = cluster_token()
    return ServeSubmissionClient(
        address or read_env("RAY_DASHBOARD_ADDRESS") or DEFAULT_ADDRESS,
        headers={"Authorization": f"Bearer {token}"} if token else None,
    )


def roll(
    rest: Any,
    app: str | None,
    change: Callable[[dict[str, Any], str], dict[str, Any]],
    timeout_s: float = 120.0,
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Deploy the running config as ``change(config, app)`` gives it and wait until the Etr
    deployment runs it, HEALTHY; returns ``served`` then. ModelsError when the app fails or
    the wait times out."""
    details = rest.get_serve_details()
    app = etr_app(details, app)
    new = change(running_config(details), app)
    want = _etr_user_config(new, app)  # change() has put it there: a read
    t0 = time.monotonic()
    rest.deploy_applications(new)
    last = ""
    while True:
        details = rest.get_serve_details()
        state = served(details, app)
        dep = details["applications"][app]["deployments"][DEPLOYMENT]
        user = dep.get("deployment_config", {}).get("user_config") or {}
        line = f"{app}/{DEPLOYMENT}: {state['status']}, {state['replicas']} replicas"
        if line != last:
            progress(f"  {time.monotonic() - t0:5.1f} s  {line}")
            last = line
        if user == want and state["status"] == "HEALTHY":
            return state
        if details["applications"][app]["status"] == "DEPLOY_FAILED" or state["status"] in (
            "UNHEALTHY",
            "DEPLOY_FAILED",
        ):
            raise ModelsError(f"the roll failed: {dep.get('message') or state['status']}")
        if time.monotonic() - t0 > timeout_s:
            raise ModelsError(f"the roll did not finish in {timeout_s:.0f} s: {line}")
        time.sleep(0.25)


def check_in_repository(version: str, root: Path = DEFAULT_ROOT) -> None:
    have = versions("etr", root)
    if version not in have:
        raise ModelsError(f"no version {version!r} under {root / 'etr'}; have {have}")
