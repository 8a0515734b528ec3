"""The ingress caches ETR answers whole, and rows when the model is a hop away: L1 in the
replica, L2 in a private Redis."""

from __future__ import annotations

import json
import time

import httpx
import redis

from etr import versions
from planner import generate_round
from serve_app.schemas import OrderIn


def etr_body(seed: int, n: int = 8) -> dict:
    orders = generate_round(0, n, seed=seed).orders
    return {"orders": [json.loads(OrderIn.from_domain(o).model_dump_json()) for o in orders]}


def test_repeated_etr_requests_hit_l1(serve_url):
    """The same body again: the whole answer from L1. The same orders in another body: computed
    again, not cached by row (the session app's model runs in the ingress, where a row costs
    less to compute than to look up)."""
    body = etr_body(71)
    reordered = {"orders": body["orders"][::-1]}
    with httpx.Client(base_url=serve_url, timeout=30) as c:
        before = c.get("/admin/status").json()["cache"]["hits"]
        first = c.post("/v1/etr", json=body).json()["minutes"]
        second = c.post("/v1/etr", json=body).json()["minutes"]
        third = c.post("/v1/etr", json=reordered).json()["minutes"]
        cache = c.get("/admin/status").json()["cache"]
    assert first == second == third[::-1]
    hits = cache["hits"]
    assert cache["levels"] == "l1"
    assert hits.get("l1:etr-answer", 0) - before.get("l1:etr-answer", 0) == 1
    assert hits.get("l1:etr", 0) == before.get("l1:etr", 0)


def test_a_redis_backed_app_writes_l2_and_answers_the_same(serve_url, redis_url):
    """Rows cached through Redis where the model is a hop away (``etr_placement``)."""
    from ray import serve

    from serve_app.builder import app_builder
    from serve_app.config import CacheArgs, DispatchAppArgs

    args = DispatchAppArgs(
        backend="numpy",
        etr_runtime="onnxruntime",
        etr_placement="deployment",
        cache=CacheArgs(redis_url=redis_url, redis_timeout_s=0.2),
    )
    serve.run(app_builder(args), name="cached", route_prefix="/cached")
    try:
        body = etr_body(72)
        with httpx.Client(base_url=serve_url, timeout=30) as c:
            got = c.post("/v1/etr", json=body)
            assert got.status_code == 200, got.text
            plain = got.json()["minutes"]
            cached = c.post("/cached/v1/etr", json=body).json()["minutes"]
            deadline = time.monotonic() + 5
            r = redis.Redis.from_url(redis_url)
            pattern = f"orml:etr:v{versions('etr')[-1]}:*"  # the newest version serves
            while len(r.keys(pattern)) < 8 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(r.keys(pattern)) == 8
            again = c.post("/cached/v1/etr", json=body).json()["minutes"]
        assert cached == plain == again
    finally:
        serve.delete("cached", _blocking=True)
