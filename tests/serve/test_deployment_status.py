"""``DeploymentStatus.readiness``: ready once both deployments are healthy, the solver's
kernels are loaded and the ingress's round codecs have loaded or failed (failed codecs
leave rounds to the parser's path, so they must not hold traffic off the replica for good)."""

from __future__ import annotations

import asyncio

import pytest

from serve_app import codecs
from serve_app.deployment_status import DeploymentStatus
from serve_app.grpc_api import round_message


class Answers:
    def __init__(self, **state):
        self.state = state

    async def ready(self):
        return self.state


SOLVER = {"healthy": True, "kernel_warming": False, "kernel_stage": ""}
ETR = {"healthy": True, "model_version": "1", "loaded_versions": ["1"]}


@pytest.mark.parametrize(
    ("solver", "reader", "ready"),
    [
        (SOLVER, "loaded", True),
        (SOLVER, "loading", False),
        (SOLVER, "failed: RuntimeError: no cache dir", True),
        ({**SOLVER, "kernel_warming": True}, "loaded", False),
        ({**SOLVER, "healthy": False}, "loaded", False),
    ],
)
def test_readiness_waits_for_what_is_loading_only(solver, reader, ready):
    status = DeploymentStatus(Answers(**solver), Answers(**ETR), 1.0, lambda: reader)
    got, why = asyncio.run(status.readiness())
    assert got is ready and why["ready"] is ready
    assert why["ingress"] == {"round_reader": reader}


def test_a_reader_that_fails_to_load_says_why(monkeypatch):
    def refuse():
        raise RuntimeError("the round reader refused its own warm-up round")

    monkeypatch.setattr(round_message, "warm_up", refuse)
    # no compiling child: only this process's load, which fails
    monkeypatch.setattr(
        codecs, "compile_in_child_then_load", lambda modules, code, load, **_: load()
    )
    monkeypatch.setattr(codecs, "_failure", "")
    assert codecs.state() in ("loading", "loaded")
    codecs.load_in_background().join(10)
    assert codecs.state() == (
        "loaded"  # an earlier test in this process loaded it: a failure later cannot unload
        if codecs.ready()
        else "failed: RuntimeError: the round reader refused its own warm-up round"
    )
