"""A dead worker process never turns into 500s: the solver's offline child processes are
SIGKILLed again and again while static solves arrive at the session's app; every answer is a
200 or a retryable 503, and the replica keeps answering (``actors.offline_process``)."""

from __future__ import annotations

import json

import httpx

from ops import hostile, slow_and_dead


def test_killing_the_offline_children_under_static_solves_fails_nothing(serve_url):
    def solve_body(k: int) -> bytes:  # a new instance each time: no cached solution answers
        return json.dumps(hostile.solve_body(40 + k, time_limit_s=0.5, seed=k)).encode()

    with slow_and_dead.killing_offline_children(every_s=1.0) as killing:
        tally = slow_and_dead.real_requests(
            serve_url, "/v1/routes/solve", solve_body, 6.0, deadline_s=30.0, clients=2
        )
    assert killing["killed"] >= 2
    assert set(tally.statuses) <= {"200", "503"}, tally.statuses
    assert tally.statuses["200"] >= 1, (tally.statuses, killing)
    # The last child killed is replaced by this solve: a fresh interpreter loading the solver,
    # which a loaded 2-core box took past 30 s once in a full test run.
    after = httpx.post(
        f"{serve_url}/v1/routes/solve",
        json=hostile.solve_body(30, time_limit_s=0.2, seed=999),
        headers={"x-timeout-ms": "90000"},
        timeout=120,
    )
    assert after.status_code == 200
    assert httpx.get(f"{serve_url}/readyz", timeout=10).status_code == 200
