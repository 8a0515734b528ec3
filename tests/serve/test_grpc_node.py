"""The gRPC API from a second language: examples/grpc_node/client.js (Node, @grpc/grpc-js and
@grpc/proto-loader as the README tells a Node user to load the proto) against the served app.
Its packages come from the npm registry; without node and npm the test says so and skips."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from planner import generate_round
from serve_app.grpc_api.client import OrmlGrpcClient
from serve_app.schemas import DispatchRequest, EtrRequest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "grpc_node"


@pytest.fixture(scope="module")
def node_client(tmp_path_factory) -> Path:
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node and npm are not installed (apt-get install -y nodejs npm)")
    if not (EXAMPLE / "node_modules" / "@grpc" / "grpc-js").is_dir():
        cmd = ["npm", "ci" if (EXAMPLE / "package-lock.json").exists() else "install"]
        got = subprocess.run(
            [*cmd, "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=EXAMPLE,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert got.returncode == 0, got.stderr[-2000:]
    return EXAMPLE / "client.js"


def run_node(client: Path, *args: str) -> list[dict]:
    got = subprocess.run(["node", str(client), *args], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    return [json.loads(line) for line in got.stdout.splitlines() if line.strip()]


def test_a_node_client_gets_the_python_clients_answers_and_the_named_field(
    node_client, grpc_address, tmp_path
):
    round_ = generate_round(12, 5, seed=4)
    dispatch = DispatchRequest.from_domain(round_)
    etr = EtrRequest(orders=dispatch.orders)
    (tmp_path / "etr.json").write_text(etr.model_dump_json())
    (tmp_path / "dispatch.json").write_text(dispatch.model_dump_json())

    etr_out, plan_out, refused = run_node(
        node_client, grpc_address, str(tmp_path / "etr.json"), str(tmp_path / "dispatch.json")
    )
    with OrmlGrpcClient(grpc_address) as py:
        want_etr = py.etr(round_.orders)
        want_plan = py.dispatch(round_)

    assert etr_out["call"] == "Etr" and etr_out["model_version"] == want_etr.model_version
    assert etr_out["minutes"] == pytest.approx(want_etr.minutes, abs=1e-9)
    got = {(a["order_id"], a["rider_id"]) for a in plan_out["assignments"]}
    assert got == {(a.order_id, a.rider_id) for a in want_plan.assignments}
    assert len(got) + len(plan_out["unassigned"]) == 5
    # The refused call: INVALID_ARGUMENT, the BadRequest detail naming the field left out.
    assert refused["code"] == "INVALID_ARGUMENT"
    assert refused["fields"] == ["orders.1.created_at"]


def test_the_node_examples_own_requests_are_answered(node_client, grpc_address):
    etr_out, plan_out, refused = run_node(node_client, grpc_address)
    assert len(etr_out["minutes"]) == 1 and etr_out["minutes"][0] > 0
    assert [(a["order_id"], a["rider_id"]) for a in plan_out["assignments"]] == [("o-1", "r-1")]
    assert refused["fields"] == ["orders.1.created_at"]
