"""A start that talks (``ops.launch``): its lines as it waits, from what Serve and /readyz
say, and a line at least every few seconds while a step says nothing of itself."""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

from ops.launch import StartProgress, deployments_state, readiness_state


def test_a_step_that_blocks_is_told_again_every_few_seconds_and_close_stops_it():
    lines: list[str] = []
    progress = StartProgress(lines.append, every_s=0.2)
    progress.step("starting Ray ...")
    time.sleep(0.75)  # blocked: no line of its own
    progress.waiting("waiting for x")
    progress.waiting("waiting for x")  # unchanged: not told twice at once
    progress.close()
    time.sleep(0.4)
    told = [re.sub(r"^\[\s*[\d.]+ s\] ", "", line) for line in lines]
    assert told[0] == "starting Ray ..." and told[-1] == "waiting for x"
    assert told.count("starting Ray ... (still)") >= 2  # every 0.2 s while blocked
    assert told.count("waiting for x") == 1
    assert all(re.match(r"^\[\s*[\d.]+ s\] ", line) for line in lines)
    stamps = [float(re.match(r"^\[\s*([\d.]+) s\]", line).group(1)) for line in lines]
    assert stamps == sorted(stamps)


def test_the_waits_are_said_in_words():
    app = SimpleNamespace(
        deployments={
            "Ingress": SimpleNamespace(replica_states={"RUNNING": 1}),
            "OrSolver": SimpleNamespace(replica_states={"STARTING": 1}),
        }
    )
    assert deployments_state(app) == "Ingress 1/1, OrSolver 0/1 (STARTING 1)"
    warming = {
        "or_solver": {"healthy": True, "kernel_warming": True, "kernel_stage": "build 3/7: assign"},
        "etr": {"healthy": False},
        "ingress": {"round_reader": "loading"},
    }
    said = readiness_state(warming)
    assert "build 3/7: assign" in said and "the ETR model loading" in said
    assert "gRPC round reader" in said
    assert readiness_state({"reason": "a deployment did not answer in 5 s"}).startswith("a dep")
    assert readiness_state({"or_solver": {"healthy": True}, "etr": {"healthy": True}}) == "ready"
