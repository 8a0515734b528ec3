"""Fault drills against a running app: steady load, replica census, fault injection.

Shared by the chaos tests (``tests/serve/test_chaos.py``), the recovery drill
(``bench/recovery.py``) and the soak (``bench/soak.py``). Everything goes over real HTTP to
a real Serve app; the census reads Serve's own state (controller status and Ray's named actors).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ops.hostile import solve_body
from ops.processes import children_of, replica_pids
from ops.slow_and_dead import kill_offline_children
from planner import generate_round
from serve_app.schemas import DispatchRequest, EtrRequest, OrderIn

log = logging.getLogger("orml.drill")

#: What a drill's replicas use instead of Serve's defaults (10 s period, 20 s shutdown): see
#: README "Operations" for the trade-off. deploy.yaml carries the same numbers.
FAST_RECOVERY: dict[str, Any] = {
    "health_check_period_s": 0.5,
    "health_check_timeout_s": 2.0,
    "graceful_shutdown_timeout_s": 1.0,
    "graceful_shutdown_wait_loop_s": 0.1,
}


def request_bodies(n: int = 32, seed: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """``n`` (path, JSON body) pairs alternating dispatch rounds and ETR calls, all valid."""
    rng = random.Random(seed)
    bodies: list[tuple[str, dict[str, Any]]] = []
    for k in range(n):
        round_ = generate_round(rng.randint(10, 30), rng.randint(3, 8), seed=seed * 1000 + k)
        if k % 2 == 0:
            bodies.append(
                ("/v1/dispatch", json.loads(DispatchRequest.from_domain(round_).model_dump_json()))
            )
        else:
            orders = [OrderIn.from_domain(o) for o in round_.orders]
            bodies.append(("/v1/etr", json.loads(EtrRequest(orders=orders).model_dump_json())))
    return bodies


@dataclass(frozen=True)
class Sample:
    """One request: start (s since epoch), latency (s, retries included), HTTP status (0: no
    response; the last answer's), path, how many times a shed answer (503 with Retry-After)
    was retried, and what a failed answer said (its body's start, or the client's error)."""

    start: float
    latency_s: float
    status: int
    path: str
    retries: int = 0
    detail: str = ""


@dataclass
class SteadyLoad:
    """Open-loop load at ``rate`` requests/s (fixed spacing) until stopped.

    Open loop on purpose: the offered load stays the same while a replica fails, so the
    drill sees the queueing a real fleet would. ``max_in_flight`` bounds memory if the app
    stops answering altogether (requests over it are counted as failed, status 0).
    ``shed_retries``: a shed answer (503 with Retry-After) is sent again this many times after
    the wait it asks for (at most 2 s), as a well-behaved client does (0: counted as failed).
    """

    base_url: str
    rate: float
    bodies: list[tuple[str, dict[str, Any]]] = field(default_factory=request_bodies)
    timeout_s: float = 60.0
    max_in_flight: int = 256
    shed_retries: int = 0
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> SteadyLoad:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        """Stop offering load, wait for the requests in flight, return every sample."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout_s + 10)
        return sorted(self.samples, key=lambda s: s.start)

    def failed(self) -> list[Sample]:
        return [s for s in self.samples if s.status != 200]

    async def _run(self) -> None:
        limits = httpx.Limits(max_connections=self.max_in_flight)
        async with httpx.AsyncClient(
            base_url=self.base_url, timeout=self.timeout_s, limits=limits
        ) as client:
            in_flight: set[asyncio.Task[None]] = set()
            period = 1.0 / self.rate
            next_at = time.perf_counter()
            k = 0
            while not self._stop.is_set():
                path, body = self.bodies[k % len(self.bodies)]
                k += 1
                if len(in_flight) >= self.max_in_flight:
                    self.samples.append(Sample(time.time(), 0.0, 0, path))
                else:
                    task = asyncio.create_task(self._one(client, path, body))
                    in_flight.add(task)
                    task.add_done_callback(in_flight.discard)
                next_at += period
                await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
            if in_flight:
                await asyncio.wait(in_flight)

    async def _one(self, client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> None:
        start, t0 = time.time(), time.perf_counter()
        retries = 0
        detail = ""
        while True:
            try:
                answer = await client.post(path, json=body)
            except httpx.HTTPError as exc:
                status, detail = 0, repr(exc)[:200]
                break
            status = answer.status_code
            detail = "" if status == 200 else answer.text[:200]
            wait = answer.headers.get("retry-after")
            if status != 503 or wait is None or retries >= self.shed_retries:
                break
            retries += 1
            await asyncio.sleep(min(float(wait), 2.0))
        self.samples.append(Sample(start, time.perf_counter() - t0, status, path, retries, detail))


def replica_ids(app: str, deployment: str) -> set[str]:
    """Ids of the deployment's replicas that are registered and alive (Ray named actors)."""
    import ray

    prefix = f"SERVE_REPLICA::{app}#{deployment}#"
    return {
        a["name"][len(prefix) :]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(prefix)
    }


def running_replicas(app: str, deployment: str) -> int:
    """How many of the deployment's replicas Serve reports RUNNING (healthy, taking traffic)."""
    from ray import serve

    status = serve.status().applications[app].deployments[deployment]
    return int(status.replica_states.get("RUNNING", 0))


def inject(base_url: str, deployment: str, kind: str) -> dict[str, Any]:
    """POST /admin/faults; returns {"deployment", "kind", "replica", "at"}."""
    r = httpx.post(
        f"{base_url}/admin/faults", json={"deployment": deployment, "kind": kind}, timeout=30
    )
    r.raise_for_status()
    return r.json()


def wait_for(predicate: Any, timeout_s: float, poll_s: float = 0.05) -> float | None:
    """Poll until ``predicate()`` is true; the wall-clock time it became so, or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return time.time()
        time.sleep(poll_s)
    return None


def watch_recovery(
    app: str, deployment: str, faulty: str, replicas: int, timeout_s: float, poll_s: float = 0.05
) -> Iterator[tuple[str, float]]:
    """Yield (event, wall time) as Serve reacts to a fault in replica ``faulty``, in order seen:

    replica_gone: the faulty replica's actor is no longer alive; serve_detected: Serve reports
    fewer than ``replicas`` RUNNING; replacement_created: a new replica's actor exists;
    full_capacity: after serve_detected, ``replicas`` RUNNING again. Stops after full_capacity.
    """
    deadline = time.monotonic() + timeout_s
    before = replica_ids(app, deployment)
    seen: set[str] = set()

    def first(event: str) -> bool:
        if event in seen:
            return False
        seen.add(event)
        return True

    while time.monotonic() < deadline:
        ids = replica_ids(app, deployment)
        running = running_replicas(app, deployment)
        now = time.time()
        if faulty not in ids and first("replica_gone"):
            yield "replica_gone", now
        if running < replicas and first("serve_detected"):
            yield "serve_detected", now
        if ids - before and first("replacement_created"):
            yield "replacement_created", now
        if "serve_detected" in seen and running >= replicas:
            yield "full_capacity", now
            return
        time.sleep(poll_s)


@dataclass
class DrillResult:
    """One injected fault under load: its timeline and every request around it."""

    deployment: str
    kind: str
    replica: str
    fault_at: float  # wall clock, s since epoch
    events: dict[str, float]  # watch_recovery's events, s after the fault
    failovers: list[dict[str, Any]]  # the ingress's retried attempts after the fault
    samples: list[Sample]

    def row(self) -> dict[str, Any]:
        """The drill table's row (seconds after the fault; None: did not happen)."""
        after = [s for s in self.samples if s.start >= self.fault_at]
        retried_at = [f["at"] - self.fault_at for f in self.failovers]
        gone = self.events.get("replica_gone")
        # The replica stopped taking work when it first refused (a failover) or died.
        detected = min([*retried_at[:1], *([gone] if gone is not None else [])], default=None)
        # No request reached the faulty replica after its last refusal or its death.
        healthy = max([*retried_at[-1:], *([gone] if gone is not None else [])], default=None)
        window = [
            s.latency_s * 1e3
            for s in after
            if s.start <= self.fault_at + self.events.get("full_capacity", 0.0)
        ]
        return {
            "deployment": self.deployment,
            "fault": self.kind,
            "requests": len(self.samples),
            "failed": sum(s.status != 200 for s in self.samples),
            "refused_attempts": len(self.failovers),
            "detected_s": _round(detected),
            "serve_detected_s": _round(self.events.get("serve_detected")),
            "traffic_healthy_s": _round(healthy),
            "full_capacity_s": _round(self.events.get("full_capacity")),
            "p50_ms_during": _round(_pct(window, 50), 1),
            "max_ms_during": _round(max(window, default=None), 1),
        }


def wait_until_warm(app: str, timeout_s: float = 60.0, polls_per_replica: int = 8) -> bool:
    """Wait until every OrSolver replica has loaded its compiled kernel (a replica loads it in
    the background after it starts taking traffic), so a drill measures one recovery, not the
    tail of the previous one. Asks ``ready`` through the router until every replica answered
    warm; True when they all did in time."""
    from ray import serve

    handle = serve.get_deployment_handle("OrSolver", app)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = replica_ids(app, "OrSolver")
        warm = set()
        for _ in range(polls_per_replica * max(1, len(alive))):
            state = handle.ready.remote().result(timeout_s=timeout_s)
            if not state["kernel_warming"]:
                warm.add(state["replica"])
        if alive and alive <= warm:
            return True
        time.sleep(0.2)
    return False


def run_drill(
    base_url: str,
    app: str,
    deployment: str,
    kind: str,
    replicas: int,
    rate: float,
    settle_s: float = 2.0,
    timeout_s: float = 60.0,
    poll_s: float = 0.05,
) -> DrillResult:
    """Steady load; after ``settle_s`` inject ``kind`` into one replica of ``deployment``;
    keep the load on until Serve is back to ``replicas`` RUNNING plus ``settle_s``."""
    from ray import serve

    if wait_for(lambda: running_replicas(app, deployment) >= replicas, timeout_s) is None:
        raise RuntimeError(f"{deployment} never reached {replicas} running replicas")
    wait_until_warm(app, timeout_s)
    load = SteadyLoad(base_url, rate).start()
    time.sleep(settle_s)
    info = inject(base_url, deployment, kind)
    fault_at = float(info["at"])
    events = {
        name: at - fault_at
        for name, at in watch_recovery(
            app, deployment, info["replica"], replicas, timeout_s, poll_s
        )
    }
    time.sleep(settle_s)
    samples = load.stop()
    ingress = serve.get_app_handle(app)
    failovers = ingress.failover_events.remote(fault_at).result()
    return DrillResult(deployment, kind, info["replica"], fault_at, events, failovers, samples)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def _round(v: float | None, digits: int = 3) -> float | None:
    return None if v is None else round(v, digits)


def solve_bodies(n: int = 64) -> list[tuple[str, dict[str, Any]]]:
    """``n`` distinct static solves (no cached answer serves them), short time limits."""
    return [
        ("/v1/routes/solve", solve_body(30 + k % 30, time_limit_s=0.3, seed=k)) for k in range(n)
    ]


def run_child_drill(
    base_url: str,
    rate: float,
    kills: int = 3,
    every_s: float = 2.0,
    settle_s: float = 2.0,
    app: str = "orml",
) -> dict[str, Any]:
    """Steady load of dispatch rounds, ETR calls and static solves; SIGKILL the solver's
    offline child processes ``kills`` times, ``every_s`` apart. A shed or retryable answer
    (503 with Retry-After) is sent again as a client does. The drill table's row: requests,
    failed (any answer but 200 after the retries), and in ``full_capacity_s`` the median time
    from a kill until a new child runs."""

    # One static solve in 16 requests (the offline lane's share, well inside its capacity),
    # each a new instance: no cached answer serves it.
    online, solves = request_bodies(240), solve_bodies(16)
    bodies = [b for k in range(16) for b in (*online[15 * k : 15 * k + 15], solves[k])]
    load = SteadyLoad(base_url, rate, bodies=bodies, shed_retries=3).start()
    time.sleep(settle_s)
    replaced: list[float] = []
    first_kill = time.time()
    for _ in range(kills):
        killed = kill_offline_children("OrSolver", app)
        at = time.time()
        fresh = wait_for(
            lambda killed=killed: any(
                set(children_of(r)) - killed for r in replica_pids("OrSolver", app)
            ),
            10.0,
        )
        if fresh is not None:
            replaced.append(fresh - at)
        time.sleep(max(0.0, every_s - (time.time() - at)))
    time.sleep(settle_s)
    samples = load.stop()
    after = [s.latency_s * 1e3 for s in samples if s.start >= first_kill]
    failed = [s for s in samples if s.status != 200]
    if failed:
        log.warning("child drill: %d failed, e.g. %s", len(failed), failed[:3])
    return {
        "deployment": "OrSolver",
        "fault": f"offline child killed x{kills}",
        "requests": len(samples),
        "failed": sum(s.status != 200 for s in samples),
        "refused_attempts": sum(s.retries for s in samples),
        "detected_s": None,
        "serve_detected_s": None,
        "traffic_healthy_s": None,
        "full_capacity_s": _round(_pct(replaced, 50)),
        "p50_ms_during": _round(_pct(after, 50), 1),
        "max_ms_during": _round(max(after, default=None), 1),
    }
