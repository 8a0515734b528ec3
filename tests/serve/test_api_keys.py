"""API keys: tokens parsed from their sources, checked in constant time per endpoint (units),
and enforced by a real app over HTTP and gRPC: 401 without or with a wrong token (with
WWW-Authenticate), 403 for a token not allowed there, health never protected."""

from __future__ import annotations

from pathlib import Path

import grpc
import httpx
import pytest
import yaml

from ops import local
from serve_app.config import DispatchAppArgs
from serve_app.grpc_api import orml_pb2 as pb
from serve_app.grpc_api import orml_pb2_grpc as pb_grpc
from serve_app.pipeline.api_keys import ApiKeys, parse_tokens
from serve_app.pipeline.errors import Forbidden, Unauthenticated
from tests.serve.conftest import LIMITS

ROOT = Path(__file__).resolve().parents[2]
ALL = "all-endpoints-token-0123456789"
ETR_ONLY = "etr-only-token-abcdefghijkl"


# ---- units ----------------------------------------------------------------------------------
def test_tokens_parse_with_scopes_and_refuse_weak_or_unknown_entries():
    keys = parse_tokens(f"# ops\n{ALL}\n{ETR_ONLY} etr, etr_bulk\n", "file")
    assert [sorted(k.endpoints) for k in keys][1] == ["etr", "etr_bulk"]
    assert len(parse_tokens(f"{ALL};{ETR_ONLY} etr", "$ENV")) == 2
    with pytest.raises(ValueError, match=r"\$ENV: entry 1: a token needs >= 16"):
        parse_tokens("short", "$ENV")
    with pytest.raises(ValueError, match="entry 2: unknown endpoints \\['billing'\\]"):
        parse_tokens(f"{ALL}\n{ETR_ONLY} billing", "file")
    with pytest.raises(ValueError, match="no token is configured"):
        ApiKeys(["dispatch"], [])


def test_check_answers_401_403_or_passes():
    keys = ApiKeys(["dispatch", "etr"], parse_tokens(f"{ALL}\n{ETR_ONLY} etr", "t"))
    keys.check("solve", None)  # not protected
    keys.check("dispatch", f"Bearer {ALL}")
    keys.check("etr", f"bearer {ETR_ONLY}")
    for header in (None, "", "Bearer ", f"Basic {ALL}", "Bearer not-a-known-token-000"):
        with pytest.raises(Unauthenticated):
            keys.check("dispatch", header)
    with pytest.raises(Forbidden):
        keys.check("dispatch", f"Bearer {ETR_ONLY}")


def test_tokens_without_anything_protected_are_a_warning_at_start(monkeypatch, caplog):
    monkeypatch.setenv("ORML_TEST_TOKENS", ALL)
    with caplog.at_level("WARNING", logger="orml.serve"):
        keys = ApiKeys.load([], "ORML_TEST_TOKENS", None)
    keys.check("dispatch", None)  # open, as configured ...
    assert "auth.protected is empty" in caplog.text  # ... and said
    assert ALL not in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="orml.serve"):
        ApiKeys.load(["etr"], "ORML_TEST_TOKENS", None)
    assert caplog.text == ""


# ---- a real app -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def secured(serve_endpoints, tmp_path_factory) -> tuple[str, str]:
    """deploy/production.yaml's own auth section, its tokens in a secret file."""
    secret = tmp_path_factory.mktemp("secret") / "tokens"
    secret.write_text(f"{ALL}\n{ETR_ONLY} etr\n")
    production = yaml.safe_load((ROOT / "deploy/production.yaml").read_text())
    auth = production["applications"][0]["args"]["auth"] | {"tokens_file": str(Path(secret))}
    args = DispatchAppArgs(backend="numpy", etr_runtime="onnxruntime", limits=LIMITS, auth=auth)
    local.run_app(args, name="secured", route_prefix="/secured")
    base = f"{serve_endpoints.http}/secured"
    local.wait_ready(base)
    yield base, serve_endpoints.grpc
    from ray import serve

    serve.delete("secured")


def _etr_body() -> bytes:
    from planner import generate_round
    from serve_app.schemas import EtrRequest, OrderIn

    orders = generate_round(0, 2, seed=3).orders
    return EtrRequest(orders=[OrderIn.from_domain(o) for o in orders]).model_dump_json().encode()


def test_http_needs_a_token_where_configured(secured):
    base, _ = secured
    body, json = _etr_body(), {"content-type": "application/json"}
    r = httpx.post(f"{base}/v1/etr", content=body, headers=json, timeout=30)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert "etr: a bearer token is required" in r.json()["detail"]
    r = httpx.post(
        f"{base}/v1/etr",
        content=body,
        headers={**json, "authorization": "Bearer wrong"},
        timeout=30,
    )
    assert r.status_code == 401 and "not valid" in r.json()["detail"]
    for token in (ALL, ETR_ONLY):
        auth = {**json, "authorization": f"Bearer {token}"}
        assert (
            httpx.post(f"{base}/v1/etr", content=body, headers=auth, timeout=30).status_code == 200
        )
    r = httpx.post(
        f"{base}/v1/dispatch",
        content=b"{}",
        headers={**json, "authorization": f"Bearer {ETR_ONLY}"},
        timeout=30,
    )
    assert r.status_code == 403 and "dispatch: this token is not allowed" in r.json()["detail"]
    r = httpx.post(f"{base}/admin/faults", json={"deployment": "Etr", "kind": "crash"}, timeout=30)
    assert r.status_code == 401  # admin is protected before anything else is said
    r = httpx.post(f"{base}/admin/faults", json={"what": "describe your schema"}, timeout=30)
    assert r.status_code == 401 and "loc" not in r.text  # the token first, then the body
    for path in ("/v1/dispatch", "/v1/etr", "/v1/etr/bulk", "/v1/routes/solve"):
        r = httpx.post(f"{base}{path}", content=b"{}", headers=json, timeout=30)
        assert r.status_code == 401, path
    assert httpx.get(f"{base}/admin/status", timeout=30).status_code == 401
    status = httpx.get(
        f"{base}/admin/status", headers={"authorization": f"Bearer {ALL}"}, timeout=30
    )
    assert status.status_code == 200 and "admission" in status.json()
    for path in ("/healthz", "/readyz"):  # never protected
        assert httpx.get(f"{base}{path}", timeout=30).status_code == 200, path


def test_grpc_needs_a_token_where_configured(secured):
    _, address = secured
    with grpc.insecure_channel(address) as channel:
        stub = pb_grpc.OrmlStub(channel)
        app = ("application", "secured")
        for method, empty in (
            (stub.Etr, pb.EtrRequest()),
            (stub.Dispatch, pb.DispatchRequest()),
            (stub.SolveRoutes, pb.SolveRequest()),
        ):
            with pytest.raises(grpc.RpcError) as err:
                method(empty, metadata=[app])
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with pytest.raises(grpc.RpcError) as err:
            stub.Dispatch(
                pb.DispatchRequest(), metadata=[app, ("authorization", f"Bearer {ETR_ONLY}")]
            )
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as err:  # past auth: the empty request is refused
            stub.Etr(pb.EtrRequest(), metadata=[app, ("authorization", f"Bearer {ALL}")])
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
