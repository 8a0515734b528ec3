"""Requests built to break the edge, and what each costs the ingress: its answer, the time,
the ingress replica's peak memory. The hostile tests (tests/serve/test_hostile_callers.py)
and ``bench/hostile.py`` send the same catalogue.

Each case is sized from the app's ``Limits`` so that it sits at a limit (a body just under the
endpoint's byte limit, lists just past theirs), and names the answers it may get: a legal
request at the limits is 200; everything else is a 4xx (or gRPC status) naming what is wrong.
Memory is the growth of the ingress process's peak resident set while the one request runs
(Linux: the peak is reset through ``/proc/PID/clear_refs`` before it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from ops.processes import replica_pids
from serve_app.config import Limits

JSON = {"content-type": "application/json"}
MSGPACK = {"content-type": "application/x-msgpack"}


@dataclass(frozen=True)
class Case:
    """One request: over HTTP (``path``, ``body``, ``headers``) or gRPC (``method``, raw
    message bytes in ``body``); ``expect``: the statuses (HTTP) or codes (gRPC) it may get."""

    name: str
    body: bytes
    expect: frozenset[int | str]
    path: str = ""
    method: str = ""
    headers: tuple[tuple[str, str], ...] = tuple(JSON.items())
    what: str = ""

    @property
    def grpc(self) -> bool:
        return bool(self.method)


@dataclass(frozen=True)
class HostileOutcome:
    """status : HTTP status or gRPC code name; answer_bytes : body (HTTP) or details and
    trailers (gRPC); peak_mb : growth of the ingress's peak RSS during the request."""

    case: str
    status: int | str
    answer_bytes: int
    seconds: float
    peak_mb: float | None
    body_bytes: int


def order(k: int) -> dict[str, Any]:
    """A valid order (JSON form)."""
    return {
        "id": f"o-{k}",
        "pickup": {"lat": 31.23, "lng": 121.47},
        "dropoff": {"lat": 31.24, "lng": 121.48},
        "created_at": 1_767_225_600.0,
        "ready_at": 1_767_226_200.0,
        "promised_at": 1_767_227_700.0,
    }


def solve_body(pairs: int, time_limit_s: float = 0.5, **extra: Any) -> dict[str, Any]:
    """A static instance of ``pairs`` pickup/delivery pairs along a line, wide windows."""
    tasks = [{"id": 0, "x": 0, "y": 0, "demand": 0, "earliest": 0, "latest": 10_000}]
    for k in range(pairs):
        p, d = 1 + 2 * k, 2 + 2 * k
        pickup = {"x": k % 97, "y": k // 7, "demand": 1, "delivery_index": d}
        delivery = {"x": (k * 7) % 89, "y": k // 5, "demand": -1, "pickup_index": p}
        for tid, task in ((p, pickup), (d, delivery)):
            tasks.append({"id": tid, "earliest": 0, "latest": 9000, "service": 1, **task})
    return {
        "vehicles": max(5, pairs // 5),
        "capacity": 10,
        "tasks": tasks,
        "time_limit_s": time_limit_s,
        **extra,
    }


def _fill(prefix: bytes, item: bytes, suffix: bytes, limit: int) -> bytes:
    """``prefix item,item,... suffix`` as long as fits in ``limit`` bytes."""
    n = max(1, (limit - len(prefix) - len(suffix)) // (len(item) + 1))
    return prefix + b",".join([item] * n) + suffix


def http_cases(limits: Limits, round_at: tuple[int, int] | None = None) -> list[Case]:
    """HTTP requests at the limits: the legal baselines first, then the hostile ones.
    round_at : (riders, orders) of the legal dispatch round (default: at most 300 x 100)."""
    etr_cap, dispatch_cap = limits.body_bytes("etr"), limits.body_bytes("dispatch")
    solve_cap = limits.body_bytes("solve")
    ok, bad = frozenset({200}), frozenset({413, 422})
    from planner import generate_round
    from serve_app.schemas import DispatchRequest

    legal_etr = json.dumps({"orders": [order(k) for k in range(limits.max_orders)]}).encode()
    stops = min(limits.max_route_stops, 8) // 2 * 2
    riders, orders = round_at or (min(limits.max_riders, 300), min(limits.max_orders, 100))
    round_ = generate_round(riders, orders, seed=0)
    legal_dispatch = DispatchRequest.from_domain(round_).model_dump_json().encode()
    rider = {"id": "r", "position": {"lat": 0, "lng": 0}, "speed_mps": 5, "capacity": 4}
    unknown = [f"{'u' * 120}{k}" for k in range(limits.max_route_stops)]
    return [
        Case("legal etr at max_orders", legal_etr, ok, "/v1/etr", what="baseline"),
        Case(
            f"legal dispatch round {riders} x {orders}",
            legal_dispatch,
            ok,
            "/v1/dispatch",
            headers=(*JSON.items(), ("x-timeout-ms", "60000")),
            what="baseline",
        ),
        Case(
            "etr: a list of zeros filling the body",
            _fill(b'{"orders":[', b"0", b"]}", etr_cap - 1),
            bad,
            "/v1/etr",
            what="400 k field errors, 33 MiB answer before",
        ),
        Case(
            "etr: empty objects filling the body",
            _fill(b'{"orders":[', b"{}", b"]}", etr_cap - 1),
            bad,
            "/v1/etr",
        ),
        Case(
            "dispatch: empty riders filling the body",
            _fill(b'{"now":0,"orders":[],"riders":[', b"{}", b"]}", dispatch_cap - 1),
            bad,
            "/v1/dispatch",
        ),
        Case(
            "dispatch: riders with routes of empty stops",
            _fill(
                b'{"now":0,"orders":[],"riders":[',
                json.dumps({**rider, "route": [{}] * (stops * 50)}).encode(),
                b"]}",
                dispatch_cap - 1,
            ),
            bad,
            "/v1/dispatch",
        ),
        Case(
            "dispatch: picked_up naming unknown orders",
            json.dumps(
                {"now": 0, "orders": [], "riders": [{**rider, "picked_up": unknown}]}
            ).encode(),
            frozenset({422}),
            "/v1/dispatch",
            what="every id echoed before",
        ),
        Case(
            "dispatch: 100 k nested lists",
            b"[" * 100_000 + b"]" * 100_000,
            frozenset({422}),
            "/v1/dispatch",
        ),
        Case(
            "etr: long strings filling the body",
            _fill(b'{"orders":[', json.dumps("x" * 4000).encode(), b"]}", etr_cap - 1),
            bad,
            "/v1/etr",
        ),
        Case(
            "etr msgpack: lists of empty maps",
            msgpack.packb({"orders": [[{}] * 2000] * max(1, (etr_cap - 64) // 2003)}),
            frozenset({422}),
            "/v1/etr",
            headers=tuple(MSGPACK.items()),
        ),
        Case(
            "solve: tasks filling the body",
            _fill(
                b'{"vehicles":1,"capacity":1,"time_limit_s":0.1,"tasks":[',
                b'{"id":0,"x":0,"y":0,"demand":0,"earliest":0,"latest":1}',
                b"]}",
                solve_cap - 1,
            ),
            bad,
            "/v1/routes/solve",
        ),
        Case(
            "solve: int64 demands",
            json.dumps(
                {
                    "vehicles": 1,
                    "capacity": 2**63,
                    "tasks": [
                        {"id": 0, "x": 0, "y": 0, "demand": 0, "earliest": 0, "latest": 9},
                        {
                            "id": 1,
                            "x": 1,
                            "y": 0,
                            "demand": 2**62,
                            "earliest": 0,
                            "latest": 9,
                            "delivery_index": 2,
                        },
                        {
                            "id": 2,
                            "x": 2,
                            "y": 0,
                            "demand": -(2**62),
                            "earliest": 0,
                            "latest": 9,
                            "pickup_index": 1,
                        },
                    ],
                }
            ).encode(),
            frozenset({422}),
            "/v1/routes/solve",
        ),
        Case(
            "etr: body over the endpoint's limit",
            b" " * (etr_cap + 1),
            frozenset({413}),
            "/v1/etr",
        ),
    ]


def grpc_cases(limits: Limits) -> list[Case]:
    """gRPC messages at the limits (``body`` is the serialized message)."""
    from serve_app.grpc_api import orml_pb2 as pb

    etr_cap = limits.body_bytes("etr")
    empty_order = pb.EtrRequest(orders=[pb.Order()]).SerializeToString()  # 2 bytes each
    legal = pb.EtrRequest(
        orders=[
            pb.Order(
                id=o["id"],
                pickup=pb.Position(**o["pickup"]),
                dropoff=pb.Position(**o["dropoff"]),
                created_at=o["created_at"],
                ready_at=o["ready_at"],
                promised_at=o["promised_at"],
            )
            for o in (order(k) for k in range(limits.max_orders))
        ]
    ).SerializeToString()
    bad = frozenset({"RESOURCE_EXHAUSTED", "INVALID_ARGUMENT"})
    return [
        Case("grpc legal etr at max_orders", legal, frozenset({"OK"}), method="Etr"),
        Case(
            "grpc etr: empty orders filling the message",
            empty_order * ((etr_cap - 1) // len(empty_order)),
            bad,
            method="Etr",
            what="300 k FieldViolations before",
        ),
        Case(
            "grpc etr: max_orders empty orders",
            empty_order * limits.max_orders,
            frozenset({"INVALID_ARGUMENT"}),
            method="Etr",
        ),
        Case(
            "grpc dispatch: not protobuf",
            b"\xff" * 1000,
            frozenset({"INVALID_ARGUMENT"}),
            method="Dispatch",
        ),
        Case(
            "grpc dispatch: over the body limit",
            pb.DispatchRequest(riders=[pb.Rider(id="r" * 1000)] * 4).SerializeToString()
            * (limits.max_body_bytes // 4000 + 2),
            frozenset({"RESOURCE_EXHAUSTED"}),
            method="Dispatch",
        ),
    ]


class IngressMemory:
    """The ingress replica's resident set, read from /proc (the same machine)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def _status(self, field: str) -> float:
        text = Path(f"/proc/{self.pid}/status").read_text()
        return int(text.split(f"{field}:")[1].split()[0]) / 1024.0

    def rss_mb(self) -> float:
        return self._status("VmRSS")

    def peak_mb(self) -> float:
        return self._status("VmHWM")

    def reset_peak(self) -> None:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")


def ingress_pid(app: str = "orml") -> int | None:
    """The pid of ``app``'s ingress replica on this machine; None when there is none."""
    pids = replica_pids("Ingress", app)
    return pids[0] if pids else None


def measure(
    case: Case,
    send: Callable[[Case], tuple[int | str, int]],
    memory: IngressMemory | None = None,
) -> HostileOutcome:
    """Send ``case`` once with ``send`` (returns status and answer bytes) and measure it."""
    before = None
    if memory is not None:
        memory.reset_peak()
        before = memory.rss_mb()
    t0 = time.perf_counter()
    status, answer = send(case)
    seconds = time.perf_counter() - t0
    peak = None if memory is None or before is None else memory.peak_mb() - before
    return HostileOutcome(case.name, status, answer, seconds, peak, len(case.body))


def http_sender(base_url: str, timeout_s: float = 60.0) -> Callable[[Case], tuple[int, int]]:
    import httpx

    client = httpx.Client(base_url=base_url, timeout=timeout_s)

    def send(case: Case) -> tuple[int, int]:
        r = client.post(case.path, content=case.body, headers=dict(case.headers))
        return r.status_code, len(r.content)

    return send


def grpc_sender(
    address: str, app: str = "orml", timeout_s: float = 60.0
) -> Callable[[Case], tuple[str, int]]:
    """Sends ``case.body`` as the raw request message of ``case.method``."""
    import grpc

    channel = grpc.insecure_channel(
        address,
        options=[("grpc.max_send_message_length", 1 << 30)],
    )

    def send(case: Case) -> tuple[str, int]:
        call = channel.unary_unary(
            f"/orml.v1.Orml/{case.method}",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            reply = call(case.body, metadata=[("application", app)], timeout=timeout_s)
            return "OK", len(reply)
        except grpc.RpcError as err:
            trailers = err.trailing_metadata() or ()
            size = len(err.details() or "") + sum(len(v) for _, v in trailers)
            return err.code().name, size

    return send
