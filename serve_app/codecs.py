"""The compiled codecs of a dispatch round, loaded off the request path: the readers of a gRPC
request (``grpc_api.round_message``) and of a JSON or msgpack one (``http.round_body``), the
writers of its answer as protobuf (``grpc_api.answer_message``) and as JSON
(``http.answer_json``).

Until they are loaded a gRPC round's request takes protobuf's parser and the model, a JSON or
msgpack one msgspec's wire Structs, and an answer is built from the plan's dict: slower, the
same answers (the JSON byte for byte). A replica starts loading them first
(``load_in_background``) and reports their ``state`` with its readiness.
"""

from __future__ import annotations

import logging
import threading

from domain import Assignment, CostBreakdown, DispatchPlan, RouteTable
from kernels.compiled import compile_in_child_then_load
from serve_app import _round_columns_jit
from serve_app.grpc_api import (
    _answer_message_jit,
    _round_message_jit,
    answer_message,
    round_message,
)
from serve_app.http import (
    _answer_json_jit,
    _json_tokens_jit,
    _round_walk_jit,
    answer_json,
    round_body,
)

log = logging.getLogger(__name__)
_loaded = threading.Event()
_failure = ""  # why loading failed ("" while loading or once loaded)


def warm_up() -> None:
    """Compile both readers and both writers (or load them from Numba's on-disk cache) in this
    process."""
    round_message.warm_up()
    round_body.warm_up()
    plan = DispatchPlan(  # one of each thing the answers hold
        assignments=(Assignment("o", "r", 1.0),),
        routes=RouteTable(["r"], [0, 1], ["o"], [True]),
        predicted_arrival={"o": 1.0},
        cost=CostBreakdown(1.0, 0.0, 1.0),
        unassigned=(),
        etr_arrival={"o": 2.0},
    )
    answer_message.dispatch_answer(plan)
    answer_json.dispatch_answer_json(plan)
    _loaded.set()


def ready() -> bool:
    """Whether the codecs are loaded in this process (the servers use them only then)."""
    return _loaded.is_set()


def state() -> str:
    """ "loaded", "loading", or "failed: <why>": codecs that failed to load leave every round
    to the slower paths (protobuf's parser and the model, answers from the plan's dict: the
    same answers), so they do not hold readiness back."""
    if _loaded.is_set():
        return "loaded"
    return f"failed: {_failure}" if _failure else "loading"


def load_in_background() -> threading.Thread:
    """Load the codecs off the request path: on a cold cache a child process compiles them
    into Numba's cache first (seconds with the GIL held), then this process loads them (about
    a second); until then ``ready()`` is False."""

    def run() -> None:
        global _failure
        code = "from serve_app.codecs import warm_up; warm_up()"
        try:
            modules = [
                _round_columns_jit,
                _round_message_jit,
                _round_walk_jit,  # with the forms' token readers built in
                _json_tokens_jit,  # its capacities, called on their own
                _answer_message_jit,
                _answer_json_jit,
            ]
            compile_in_child_then_load(modules, code, warm_up)
        except Exception as exc:  # any failure: every round takes the slower paths
            _failure = f"{type(exc).__name__}: {exc}"[:200]
            log.warning(
                "the round codecs did not load (%s); rounds take the slower paths", _failure
            )

    thread = threading.Thread(target=run, name="orml-round-codecs", daemon=True)
    thread.start()
    return thread
