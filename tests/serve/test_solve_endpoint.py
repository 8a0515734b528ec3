"""POST /v1/routes/solve: a Li & Lim instance in, feasible routes out, cached per instance."""

from __future__ import annotations

from pathlib import Path

import httpx

from planner.pdptw.evaluate import evaluate
from planner.pdptw.instance import load_instance

DATA = Path(__file__).resolve().parents[2] / "data/pdptw/instances"


def instance_body(name: str, time_limit_s: float = 1.0) -> dict:
    lines = (DATA / f"{name}.txt").read_text().split("\n")
    k, q, _ = lines[0].split()
    keys = (
        "id",
        "x",
        "y",
        "demand",
        "earliest",
        "latest",
        "service",
        "pickup_index",
        "delivery_index",
    )
    tasks = []
    for line in lines[1:]:
        if line.strip():
            vals = [float(v) for v in line.split()]
            tasks.append(
                {
                    key: (
                        int(v) if key in ("id", "demand", "pickup_index", "delivery_index") else v
                    )
                    for key, v in zip(keys, vals, strict=True)
                }
            )
    return {
        "name": name,
        "vehicles": int(k),
        "capacity": int(q),
        "tasks": tasks,
        "time_limit_s": time_limit_s,
        "seed": 0,
    }


def test_solve_returns_feasible_routes_and_caches_them(serve_url):
    body = instance_body("lc101")
    with httpx.Client(base_url=serve_url, timeout=60, headers={"x-priority": "offline"}) as c:
        first = c.post("/v1/routes/solve", json=body)
        second = c.post("/v1/routes/solve", json=body)
    assert first.status_code == 200, first.text
    got = first.json()
    assert got["feasible"] and got["cached"] is False and got["instance"] == "lc101"
    ev = evaluate(load_instance(DATA / "lc101.txt"), got["routes"])
    assert ev.feasible and ev.vehicles == got["vehicles"]
    assert second.json()["cached"] is True and second.json()["routes"] == got["routes"]


def test_an_unpaired_pickup_is_422_naming_the_task(serve_url):
    body = instance_body("lc101")
    body["tasks"][3]["delivery_index"] = 0 if body["tasks"][3]["demand"] > 0 else 5
    body["tasks"][3]["pickup_index"] = 0 if body["tasks"][3]["demand"] < 0 else 7
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        r = c.post("/v1/routes/solve", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"][:2] == ["body", "tasks"]
