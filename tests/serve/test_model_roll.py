"""Model versions rolled live: a real ``orml serve`` (deploy.yaml, Redis L2, the ETR caches
on) under steady load over HTTP and gRPC; ``orml models load 2`` then ``orml models load 1``
roll the ETR replicas through Serve's REST API. Every request is answered (no failure), every
answer's minutes are those of the version it names (checked against each version's own
runtime, so a v2 answer filed under a v1 cache key would show), the two Etr replicas are the
same processes throughout (reconfigured, not restarted), and ``orml models list|unload``
report and free versions."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import yaml

from etr import features_from_orders, load_artifact, load_runtime
from ops import models
from ops.ports import free_ports
from planner import generate_round
from serve_app.grpc_api.client import OrmlGrpcClient, OrmlGrpcError
from serve_app.schemas import DispatchRequest, OrderIn
from tests.orml_serve import orml_serve

ROOT = Path(__file__).resolve().parents[2]
ORML = [sys.executable, "-m", "cli.main"]
pytestmark = pytest.mark.serve


@pytest.fixture(scope="module")
def app(tmp_path_factory, redis_server):
    """``orml serve`` on free ports, serving ETR v1; yields (HTTP URL, gRPC address,
    dashboard URL)."""
    http, grpc, dashboard, metrics = free_ports(4)
    tmp = tmp_path_factory.mktemp("roll")
    config = yaml.safe_load((ROOT / "deploy.yaml").read_text())
    etr = next(d for d in config["applications"][0]["deployments"] if d["name"] == "Etr")
    assert etr["user_config"]["model_version"] == "1"
    # Two replicas, fixed: they swap one after the other, and both must be the same processes
    # after the roll.
    del etr["autoscaling_config"]
    etr["num_replicas"] = 2
    (tmp / "deploy.yaml").write_text(yaml.safe_dump(config))
    argv = [
        *ORML,
        *("serve", "--config", str(tmp / "deploy.yaml"), "--port", str(http)),
        *("--grpc-port", str(grpc), "--dashboard-port", str(dashboard)),
        *("--metrics-port", str(metrics)),
    ]
    with orml_serve(argv, {**os.environ, "ORML_REDIS_URL": redis_server.url}, tmp / "serve.log"):
        yield f"http://127.0.0.1:{http}", f"127.0.0.1:{grpc}", f"http://127.0.0.1:{dashboard}"


def orml_models(*args: str, dashboard: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ORML, "models", *args, "--address", dashboard],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def etr_replicas(dashboard: str) -> dict[str, str]:
    """The Etr replicas' ids and their processes (Serve's REST API)."""
    details = models.client(dashboard).get_serve_details()
    replicas = details["applications"]["orml"]["deployments"]["Etr"]["replicas"]
    return {r["replica_id"]: r["pid"] for r in replicas}


def served(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def etr_requests(n: int) -> list[tuple[list, dict, dict[str, np.ndarray]]]:
    """n requests: the orders, their /v1/etr body and the minutes each version gives them."""
    runtimes = {v: load_runtime(load_artifact("etr", v), "onnxruntime") for v in ("1", "2")}
    out = []
    for seed in range(n):
        orders = generate_round(0, 4, seed=seed).orders
        body = {"orders": [OrderIn.from_domain(o).model_dump(mode="json") for o in orders]}
        features = features_from_orders(orders)
        out.append((orders, body, {v: r.predict(features) for v, r in runtimes.items()}))
    return out


async def steady_load(
    url: str, grpc_address: str, stop: asyncio.Event, rate: float = 40.0
) -> list[dict]:
    """ETR requests (8 bodies, so both caches hit), every 5th over gRPC, and a dispatch round
    every 10th tick."""
    requests = etr_requests(8)
    round_ = DispatchRequest.from_domain(generate_round(20, 6, seed=3)).model_dump(mode="json")
    results: list[dict] = []
    grpc_client = OrmlGrpcClient(grpc_address)

    async def one(c: httpx.AsyncClient, k: int) -> None:
        orders, body, want = requests[k % len(requests)]
        if k % 10 == 9:
            r = await c.post("/v1/dispatch", json=round_)
            results.append({"endpoint": "dispatch", "status": r.status_code, **r.json()})
        elif k % 5 == 2:
            try:
                got = (await asyncio.to_thread(grpc_client.etr, orders)).model_dump()
                results.append({"endpoint": "etr", "via": "grpc", "status": 200, **got})
            except OrmlGrpcError as exc:
                results.append({"endpoint": "etr", "via": "grpc", "status": str(exc.code)})
        else:
            r = await c.post("/v1/etr", json=body)
            results.append({"endpoint": "etr", "via": "http", "status": r.status_code, **r.json()})
        results[-1].update(at=time.monotonic(), want=want)

    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        tasks, k = [], 0
        while not stop.is_set():
            tasks.append(asyncio.ensure_future(one(c, k)))
            k += 1
            await asyncio.sleep(1 / rate)
        await asyncio.gather(*tasks)
    grpc_client.close()
    return results


def test_a_roll_v1_v2_v1_under_load_drops_nothing_and_every_answer_names_its_version(app):
    url, grpc_address, dashboard = app
    listed = orml_models("list", dashboard=dashboard)
    assert "| 2 |" in listed.stdout and served(listed)["model_version"] == "1"
    replicas = etr_replicas(dashboard)
    assert len(replicas) == 2

    async def scenario() -> tuple[list[dict], list[dict]]:
        stop = asyncio.Event()
        load = asyncio.ensure_future(steady_load(url, grpc_address, stop))
        rolls = []
        for version in ("2", "1"):
            await asyncio.sleep(4)
            proc = await asyncio.to_thread(orml_models, "load", version, dashboard=dashboard)
            rolls.append({**served(proc), "done_at": time.monotonic()})
        await asyncio.sleep(4)
        stop.set()
        return await load, rolls

    results, rolls = asyncio.run(scenario())
    etr = [r for r in results if r["endpoint"] == "etr"]
    versions = [r["model_version"] for r in etr]
    after = [
        f"{r['via']}:{r['model_version']}@{r['at'] - rolls[-1]['done_at']:+.2f}s" for r in etr[-40:]
    ]
    print(f"{len(results)} answers; versions in order: {_runs(versions)}; rolls: {rolls}")
    print("the last ETR answers (version, seconds after the roll back):", " ".join(after))
    assert [r["model_version"] for r in rolls] == ["2", "1"]
    assert rolls[1]["warm_versions"] == ["2"]  # the replaced version stays warm
    assert [r for r in results if r["status"] != 200] == []
    for r in etr:  # the minutes are the named version's, cache hit or not
        np.testing.assert_allclose(r["minutes"], r["want"][r["model_version"]], rtol=1e-5)
    assert versions[0] == "1" and "2" in versions and versions[-20:] == ["1"] * 20
    assert {r["model_version"] for r in results if r["endpoint"] == "dispatch"} <= {"1", "2"}
    assert len(results) > 300
    # The same replicas answered throughout: reconfigured in place, never restarted.
    assert etr_replicas(dashboard) == replicas
    assert httpx.get(f"{url}/readyz", timeout=10).json()["etr"]["loaded_versions"] == ["1", "2"]

    # Both versions loaded: the Open Inference Protocol's versioned paths answer with each.
    import tritonclient.http as triton

    client = triton.InferenceServerClient(url.removeprefix("http://"))
    orders, _, want = etr_requests(1)[0]
    tensor = triton.InferInput("features", [len(orders), 39], "FP32")
    tensor.set_data_from_numpy(features_from_orders(orders))
    for version in ("2", "1", "2"):
        got = client.infer("etr", [tensor], model_version=version)
        assert got.get_response()["model_version"] == version
        np.testing.assert_allclose(got.as_numpy("minutes"), want[version], rtol=1e-5)
    index = client.get_model_repository_index()
    assert [(m["version"], m["state"]) for m in index] == [("1", "READY"), ("2", "READY")]
    assert client.get_model_config("etr")["version_policy"] == {"specific": {"versions": [1, 2]}}

    refused = orml_models("unload", "1", dashboard=dashboard)
    assert refused.returncode == 2 and "is serving" in refused.stderr
    assert served(orml_models("unload", "2", dashboard=dashboard))["warm_versions"] == []
    missing = orml_models("load", "9", dashboard=dashboard)
    assert missing.returncode == 2 and "no version '9'" in missing.stderr


def _runs(seq: list[str]) -> str:
    """'1x120 2x150 1x90': each version and how many answers in a row named it."""
    out: list[list] = []
    for v in seq:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return " ".join(f"{v}x{n}" for v, n in out)
