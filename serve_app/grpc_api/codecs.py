"""The compiled codecs of a gRPC dispatch round, loaded off the request path: the reader of
its request (``round_message``) and the writer of its answer (``answer_message``).

Until they are loaded a round's request takes protobuf's parser and the model, and its answer
a message filled from the plan's dict: slower, the same answers. A replica starts loading them
first (``load_in_background``) and reports their ``state`` with its readiness.
"""

from __future__ import annotations

import logging
import threading

from kernels.compiled import compile_in_child_then_load
from serve_app.grpc_api import (
    _answer_message_jit,
    _round_message_jit,
    answer_message,
    round_message,
)

log = logging.getLogger(__name__)
_loaded = threading.Event()
_failure = ""  # why loading failed ("" while loading or once loaded)


def warm_up() -> None:
    """Compile both (or load them from Numba's on-disk cache) in this process."""
    round_message.warm_up()
    answer_message.warm_up()
    _loaded.set()


def ready() -> bool:
    """Whether the codecs are loaded in this process (the servers use them only then)."""
    return _loaded.is_set()


def state() -> str:
    """ "loaded", "loading", or "failed: <why>": codecs that failed to load leave every round
    to protobuf's parser and the model (slower, same answers), so they do not hold readiness
    back."""
    if _loaded.is_set():
        return "loaded"
    return f"failed: {_failure}" if _failure else "loading"


def load_in_background() -> threading.Thread:
    """Load the codecs off the request path: on a cold cache a child process compiles them
    into Numba's cache first (seconds with the GIL held), then this process loads them (about
    a second); until then ``ready()`` is False."""

    def run() -> None:
        global _failure
        code = "from serve_app.grpc_api.codecs import warm_up; warm_up()"
        try:
            compile_in_child_then_load([_round_message_jit, _answer_message_jit], code, warm_up)
        except Exception as exc:  # any failure: every round takes the parser's path
            _failure = f"{type(exc).__name__}: {exc}"[:200]
            log.warning(
                "the gRPC round codecs did not load (%s); rounds take the parser's path", _failure
            )

    thread = threading.Thread(target=run, name="orml-round-codecs", daemon=True)
    thread.start()
    return thread
