"""Choosing the array module (``xp``): CuPy on a working CUDA device, NumPy otherwise.

Kernels take ``xp`` from their inputs (``array_module``), so data that already lives on a device
stays there; the round-level entry points take a backend name and move arrays once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from types import ModuleType
from typing import Any, Literal

import numpy as np

BackendName = Literal["numpy", "cupy"]


@lru_cache(maxsize=1)
def cupy_available() -> bool:
    """True when CuPy imports and a CUDA device runs a trivial kernel."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return False
        int((cupy.arange(4) * 2).sum().get())
        return True
    except Exception:
        return False


def resolve_backend(name: str) -> BackendName:
    """The backend ``name`` ("auto", "numpy" or "cupy") runs on here: "auto" is CuPy when a
    CUDA device works, else NumPy (the setting itself is the caller's: ``config.backend_for``).

    Raises ValueError for an unknown name, RuntimeError when ``cupy`` is forced but unusable.
    """
    if name == "auto":
        return "cupy" if cupy_available() else "numpy"
    if name == "numpy":
        return "numpy"
    if name == "cupy":
        if not cupy_available():
            raise RuntimeError("backend 'cupy' was requested but no working CUDA device is found")
        return "cupy"
    raise ValueError(f"unknown backend {name!r}: expected 'auto', 'numpy' or 'cupy'")


def backend_for_pairs(
    device: BackendName, auto: bool, pairs: int, gpu_min_pairs: int
) -> BackendName:
    """The backend for one round of ``pairs`` rider x order pairs on a process whose backend
    resolved to ``device``: NumPy for a round under ``gpu_min_pairs`` when the choice was
    "auto", else ``device``.

    Why: end to end, a small round on a GPU is host work and dozens of small launches (the
    passes, the host's share of the assignment, the route edits), which the host's own cores
    do sooner; only large rounds repay the device (``bench/kernels.py`` measures the
    crossover; the results page has it). A forced "cupy" keeps every round on the GPU."""
    if auto and device == "cupy" and pairs < gpu_min_pairs:
        return "numpy"
    return device


def backend_for_round(name: str, n_riders: int, n_orders: int, gpu_min_pairs: int) -> BackendName:
    """``resolve_backend(name)`` for one round of ``n_riders`` x ``n_orders``, with "auto"
    keeping a round under ``gpu_min_pairs`` pairs on NumPy (``backend_for_pairs``). Raises as
    ``resolve_backend``."""
    return backend_for_pairs(
        resolve_backend(name), name == "auto", n_riders * n_orders, gpu_min_pairs
    )


def module_for(name: BackendName) -> ModuleType:
    """The array module for a backend name."""
    if name == "cupy":
        import cupy

        return cupy
    return np


def array_module(*arrays: Any) -> ModuleType:
    """The array module of ``arrays``; raises ValueError when they live on different devices."""
    if all(type(a) is np.ndarray for a in arrays):  # the hot path of every CPU kernel call
        return np
    modules = {type(a).__module__.split(".")[0] for a in arrays if hasattr(a, "__array__")}
    modules.discard("builtins")
    if "cupy" in modules:
        if "numpy" in modules:
            raise ValueError("inputs mix NumPy (host) and CuPy (device) arrays; move them first")
        import cupy

        return cupy
    return np


def to_numpy(a: Any) -> np.ndarray:
    """A host copy of a NumPy or CuPy array."""
    get = getattr(a, "get", None)
    return get() if callable(get) else np.asarray(a)


def device_clock(xp: ModuleType) -> tuple[Callable[[], Any], Callable[[Any, Any], float]] | None:
    """For CuPy, what times work on its stream without waiting for it: a new event, and the
    milliseconds between two recorded events (``planner.stage_times``); None for NumPy, whose
    work is done when its call returns (the wall clock times it)."""
    if xp is np:
        return None
    return xp.cuda.Event, xp.cuda.get_elapsed_time
