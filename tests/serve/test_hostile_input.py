"""Hostile input: the HTTP API fuzzed from its own OpenAPI schema, plus hand-made abuse.

Every response must be a 2xx or a 4xx naming what was wrong: no 5xx, whatever arrives.
"""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from planner import generate_round
from serve_app.schemas import DispatchRequest

from .conftest import LIMITS

pytestmark = pytest.mark.serve

ROOT = Path(__file__).resolve().parents[2]


FUZZ_CASES_PER_OPERATION = 25


def test_fuzzed_requests_never_get_a_5xx(serve_url):
    """Schemathesis generates requests from /openapi.json (valid and invalid); none gets a 5xx.

    (Its strategies are driven with hypothesis directly: the pytest plugin does not support
    pytest 9 yet.)
    """
    schema = schemathesis.openapi.from_url(f"{serve_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {"/v1/dispatch", "/v1/etr", "/v1/routes/solve"}
    for op in operations:

        @settings(
            max_examples=FUZZ_CASES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,  # the same cases on every run: a CI failure is reproducible
            database=None,
        )
        @given(case=op.as_strategy())
        def fuzz(case):
            if case.path == "/v1/routes/solve" and isinstance(case.body, dict):
                # Valid fuzzed instances would otherwise solve for up to two minutes each.
                limit = case.body.get("time_limit_s")
                if isinstance(limit, int | float) and not isinstance(limit, bool):
                    case.body["time_limit_s"] = min(float(limit), 0.2)
            case.call_and_validate(checks=[not_a_server_error])

        fuzz()


def valid_body() -> dict:
    return json.loads(DispatchRequest.from_domain(generate_round(3, 2, seed=5)).model_dump_json())


def post(url: str, **kw) -> httpx.Response:
    return httpx.post(url, timeout=60, **kw)


@pytest.mark.parametrize(
    "body",
    [b"not json at all", b"\xff\xfe\xfa invalid utf-8", b"[" * 100_000 + b"]" * 100_000, b""],
    ids=["not-json", "invalid-utf8", "deep-nesting", "empty"],
)
def test_bodies_that_are_not_json_are_422_under_body(serve_url, body):
    r = post(f"{serve_url}/v1/dispatch", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text[:200]
    assert r.json()["detail"][0]["loc"][0] == "body"


@pytest.mark.parametrize(
    ("path", "limit"),
    [
        ("/v1/dispatch", LIMITS.body_bytes("dispatch")),
        ("/v1/etr/bulk", LIMITS.body_bytes("etr_bulk")),
    ],
    ids=["direct-route", "fastapi-route"],
)
def test_a_chunked_body_over_the_limit_without_length_is_413(serve_url, path, limit):
    def chunks():
        for _ in range(20):
            yield b" " * (1 << 20)  # 20 MiB in all, no Content-Length

    r = post(f"{serve_url}{path}", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413, r.text[:200]
    assert f"exceeds the limit of {limit}" in r.json()["detail"]


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (["riders", 0, "capacity"], True, "capacity"),
        (["riders", 0, "speed_mps"], "5", "speed_mps"),
        (["now"], 1e300, "now"),
        (["orders", 0, "created_at"], 1e11, "created_at"),
        (["weights", "max_orders_per_rider"], 1.5, "max_orders_per_rider"),
    ],
)
def test_loose_types_and_absurd_times_are_422_naming_the_field(serve_url, path, value, field):
    body = valid_body()
    node = body
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    r = post(f"{serve_url}/v1/dispatch", json=body)
    assert r.status_code == 422, r.text[:300]
    assert field in json.dumps(r.json()["detail"])


def test_the_docs_page_loads_only_files_the_app_serves(serve_url):
    """No CDN: Swagger UI's script and style come from the app itself."""
    page = httpx.get(f"{serve_url}/docs", timeout=30)
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page.text)
    assets = [u for u in urls if u.endswith((".js", ".css"))]
    assert assets and all(u.startswith("/") for u in assets), urls
    for url in assets:
        assert httpx.get(f"{serve_url}{url}", timeout=30).status_code == 200, url


def test_huge_arrays_are_rejected_by_size_before_parsing(serve_url):
    body = valid_body()
    body["orders"] = body["orders"] * 100_000  # ~ 50 MB of JSON, over the 2 MiB test limit
    r = post(f"{serve_url}/v1/dispatch", json=body)
    assert r.status_code == 413


def test_a_long_but_small_array_is_named_in_a_413(serve_url):
    body = valid_body()
    order = body["orders"][0]
    body["orders"] = [{**order, "id": f"o{k}"} for k in range(LIMITS.max_orders + 1)]
    r = post(f"{serve_url}/v1/dispatch", json=body)
    assert r.status_code == 413 and "orders" in r.json()["detail"]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_422(serve_url, value):
    text, n = re.subn(
        r'"speed_mps": [0-9.e+-]+', f'"speed_mps": {value}', json.dumps(valid_body()), count=1
    )
    assert n == 1
    r = post(f"{serve_url}/v1/dispatch", content=text, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text[:300]
    assert "speed_mps" in json.dumps(r.json()["detail"])


@pytest.mark.parametrize("rider_id", ["骑手-7", "rider\u202e", "🛵" * 64, "a\x00b", ""])
def test_unicode_and_control_ids_are_answered_not_crashed(serve_url, rider_id):
    body = valid_body()
    body["riders"][0]["id"] = rider_id
    r = post(f"{serve_url}/v1/dispatch", json=body)
    assert r.status_code in (200, 422), r.text[:300]


def test_pickle_bodies_are_refused_and_never_loaded(serve_url, tmp_path):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (Path.touch, (marker,))

    payload = pickle.dumps(Exploit())
    for ctype in ("application/octet-stream", "application/python-pickle", "application/json"):
        r = post(f"{serve_url}/v1/dispatch", content=payload, headers={"content-type": ctype})
        assert 400 <= r.status_code < 500
    assert not marker.exists()


def test_no_module_on_the_request_path_unpickles():
    """The serving path never calls pickle/marshal/eval on bytes (Ray's own transport aside)."""
    banned = re.compile(r"\b(pickle|cPickle|dill|marshal|shelve)\.loads?\b|\beval\(|\bexec\(")
    for package in ("serve_app", "actors", "cache", "etr", "planner", "kernels", "domain"):
        for path in (ROOT / package).rglob("*.py"):
            assert not banned.search(path.read_text()), path
