"""Two compilations of one kernel body: on the CPU's threads and on the calling thread.

Why both: waking Numba's thread pool costs more than a small batch takes on one core, and on a
busy host (two replicas on two cores, say) a parallel region also waits for threads the OS has
given to someone else, tens of milliseconds where the work takes one. Callers pick the serial
build below a size and the parallel one above.
"""

from __future__ import annotations

import types
from typing import Any

from numba import njit

#: Inner-loop iterations (placements, bounds, matrix entries) below which one thread is faster
#: than the pool.
PARALLEL_MIN_WORK = 200_000


def _named(fn: Any, name: str) -> Any:
    """``fn`` under another name: Numba names its on-disk cache after the function, and two
    builds of one function would share (and overwrite) one cache index."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = name
    return copy


def serial_and_parallel(body: Any, **options: Any) -> tuple[Any, Any]:
    """(serial, parallel) compiled builds of ``body`` (``prange`` runs as ``range`` in the
    serial one), each cached on disk under its own name; ``options`` go to ``njit``."""
    name = body.__name__
    serial = njit(cache=True, nogil=True, **options)(_named(body, f"{name}_serial"))
    parallel = njit(cache=True, nogil=True, parallel=True, **options)(
        _named(body, f"{name}_parallel")
    )
    return serial, parallel
