"""Traffic classes on a real app: a static solve steps aside for dispatch rounds and finishes
after them; the bulk ETR endpoint runs as offline work; replicas report Busy per class."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from etr import features_from_orders, load_artifact, load_runtime
from planner import generate_round
from planner.pdptw.instance import load_instance
from serve_app.schemas import DispatchRequest, OrderIn, SolveRequest

pytestmark = pytest.mark.serve
ROOT = Path(__file__).resolve().parents[2]


def solver_stats() -> dict:
    from ray import serve

    return serve.get_deployment_handle("OrSolver", "orml").stats.remote().result(timeout_s=30)


def test_a_static_solve_steps_aside_for_dispatch_rounds_and_finishes_after_them(serve_url):
    instance = load_instance(ROOT / "data/pdptw/instances/lr101.txt")
    solve = SolveRequest.from_instance(instance, time_limit_s=4.0, seed=7).model_dump_json()
    rounds = [
        DispatchRequest.from_domain(generate_round(40, 10, seed=300 + k)).model_dump_json()
        for k in range(12)
    ]
    before = solver_stats()
    json_type = {"content-type": "application/json"}

    async def go():
        async with httpx.AsyncClient(base_url=serve_url, timeout=120) as c:
            offline = asyncio.ensure_future(
                c.post("/v1/routes/solve", content=solve, headers=json_type)
            )
            await asyncio.sleep(0.5)  # the solve is running
            done = []
            for body in rounds:
                r = await c.post("/v1/dispatch", content=body, headers=json_type)
                done.append((r.status_code, time.monotonic()))
                await asyncio.sleep(0.05)
            solved = await offline
            return done, solved, time.monotonic()

    done, solved, solved_at = asyncio.run(go())
    assert [s for s, _ in done] == [200] * len(rounds)
    assert solved.status_code == 200 and solved.json()["feasible"], solved.text[:300]
    assert max(t for _, t in done) < solved_at  # the offline solve finished later
    after = solver_stats()
    assert after["yields"] > before["yields"]  # it stepped aside for them
    assert after["busy_offline"] > 0 and after["busy_online"] > 0


def test_static_solves_run_in_child_processes_at_the_lowest_cpu_priority(serve_url):
    stats = solver_stats()
    assert stats["offline_priority"] == "idle" and stats["offline_pids"]
    for pid in stats["offline_pids"]:
        assert pid != stats["pid"] and os.sched_getscheduler(pid) == os.SCHED_IDLE


def test_bulk_etr_answers_many_orders_as_offline_work(serve_url):
    from ray import serve

    orders = generate_round(0, 1200, seed=41).orders
    body = {"orders": [json.loads(OrderIn.from_domain(o).model_dump_json()) for o in orders]}
    r = httpx.post(f"{serve_url}/v1/etr/bulk", json=body, timeout=120)
    assert r.status_code == 200, r.text[:300]
    want = load_runtime(load_artifact("etr"), "onnxruntime").predict(features_from_orders(orders))
    np.testing.assert_allclose(r.json()["minutes"], want, atol=1e-4)
    # The session's Etr replicas run on the CPU, so the ingress computes the model (with the
    # Etr replica's batcher and its traffic classes).
    ingress = serve.get_app_handle("orml").stats.remote().result(timeout_s=30)
    assert ingress["etr_in_the_ingress"]["busy_offline"] > 0
