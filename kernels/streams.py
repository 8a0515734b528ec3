"""Priority that reaches the device: online kernels on a high-priority CUDA stream, offline
kernels on a low-priority one.

Our queues put online work first, but once an offline round's kernels are on the device the GPU
treats them like any other: a 5000 x 2000 insertion pricing is ~80 k thread blocks, and an online
round's kernels queued behind it wait for all of them. CUDA stream priorities
(``cudaStreamCreateWithPriority``) tell the block scheduler to start a higher-priority stream's
pending blocks first as SMs free up; running blocks are never pre-empted, so an online kernel
waits at most for the blocks already resident (one "wave"), not for the whole offline kernel.

Only kernels obey priorities (copies do not), and only within one CUDA context: both classes
must run in the same process, as they do on one solver replica.

On NumPy (no device) ``class_stream`` is a no-op, so callers need not care where they run.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
from collections.abc import Iterator
from functools import lru_cache
from types import ModuleType
from typing import Any

_local = threading.local()


@lru_cache(maxsize=1)
def _driver() -> ctypes.CDLL:
    """The CUDA driver library. CuPy 14 wraps no stream-priority call of the runtime, so the
    range and the read-back go through the driver's, on CuPy's own (primary) context."""
    return ctypes.CDLL("libcuda.so.1")


def _check(status: int, call: str) -> None:
    if status != 0:
        raise RuntimeError(f"{call} failed with CUresult {status}")


def _make_context_current() -> None:
    import cupy

    cupy.cuda.runtime.free(0)  # binds the device's primary context to this thread


@lru_cache(maxsize=1)
def priority_range() -> tuple[int, int]:
    """(least, greatest) stream priority of the current device; lower numbers run first.
    (0, 0) where the device has no priorities."""
    _make_context_current()
    least, greatest = ctypes.c_int(), ctypes.c_int()
    _check(
        _driver().cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)),
        "cuCtxGetStreamPriorityRange",
    )
    return least.value, greatest.value


def stream_priority(stream: Any) -> int:
    """The priority a CuPy stream was given (as the device clamped it)."""
    _make_context_current()
    priority = ctypes.c_int()
    _check(
        _driver().cuStreamGetPriority(ctypes.c_void_p(stream.ptr), ctypes.byref(priority)),
        "cuStreamGetPriority",
    )
    return priority.value


def new_stream(priority: int) -> Any:
    """A non-blocking CuPy stream of the given priority (clamped to the device's range)."""
    import cupy

    try:
        return cupy.cuda.Stream(non_blocking=True, priority=priority)
    except TypeError:  # a CuPy whose Stream takes no priority: create it through the driver
        _make_context_current()
        handle = ctypes.c_void_p()
        non_blocking = 0x1  # CU_STREAM_NON_BLOCKING
        _check(
            _driver().cuStreamCreateWithPriority(
                ctypes.byref(handle), ctypes.c_uint(non_blocking), ctypes.c_int(priority)
            ),
            "cuStreamCreateWithPriority",
        )
        return cupy.cuda.ExternalStream(handle.value)  # lives as long as the process


def stream_for(online: bool) -> Any:
    """This thread's CuPy stream for a traffic class: the device's greatest priority for
    online work, its least for offline. One stream per (thread, class), made on first use:
    a stream shared between threads would order their kernels one after the other."""
    streams = getattr(_local, "streams", None)
    if streams is None:
        streams = _local.streams = {}
    if online not in streams:
        least, greatest = priority_range()
        streams[online] = new_stream(greatest if online else least)
    return streams[online]


@contextlib.contextmanager
def class_stream(xp: ModuleType, online: bool) -> Iterator[None]:
    """Run the block's device work on its class's stream (CuPy), or as it is (NumPy).

    Results read back with ``.get()`` inside the block synchronise that stream; device arrays
    that leave the block are ordered on it, so read them inside or synchronise first."""
    if xp.__name__ != "cupy":
        yield
        return
    with stream_for(online):
        yield
