"""When the compiled CPU builds (Numba) of the kernels are used, and how they are loaded.

Six kernels have a compiled CPU twin of an array-loop build: ``insertion_costs``
(``_insertion_costs_jit``), ``insertion_lower_bounds`` (``_insertion_bounds_jit``), ``assign``
(``_assign_jit``), ``schedule``'s loop (``_schedule_jit``), ``improve`` (``_improve_jit``) and
``insert_orders`` (``_route_edit_jit``); ``certified_assign``'s scans and
sparse solve (``_pair_scan_jit``, ``_sparse_assign_jit``) are compiled only, and the solve
prices densely while they load. Each twin answers like its loop (bit for bit; the bounds up to
float32 rounding), so "auto" may pick either without a caller being able to tell; it picks the
loop while the compiled builds are warming (``warming()``) and the compiled one after.

Why the warming state exists: loading the builds costs a replica seconds with the GIL held
(``import numba`` among them), and compiling them far longer on a slow host. A replacement
replica that did either in its constructor would be that much later taking traffic, so a
replica defers them (``defer()``) and loads them in the background once it is up
(``warm_up_in_background()``).
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import threading
import types
from collections.abc import Callable
from pathlib import Path

# Set from ``defer`` or ``warm_up_in_background`` until the compiled builds are loaded.
_warming = threading.Event()
_stage = ""  # what the warm-up does now, in words ("" when it is not running)

_REPO_ROOT = Path(__file__).resolve().parents[1]


def defer() -> None:
    """Use the array loops ("auto") until ``warm_up_in_background`` has loaded the compiled
    builds: for a process that starts the loader later, off its start-up path."""
    _warming.set()


def resume() -> None:
    """Use the compiled builds again after ``defer``, without loading them first (the first
    call compiles or loads its build): for a process that deferred and will never start the
    loader, such as a test that built a replica in-process."""
    _warming.clear()


def warming() -> bool:
    """True from ``defer`` or ``warm_up_in_background`` until the compiled builds are loaded."""
    return _warming.is_set()


def warming_stage() -> str:
    """What the background warm-up does now, e.g. "build 3/7: assign";
    "" when none runs."""
    return _stage


# (name, module): each module's ``warm_up`` compiles or loads its builds.
_BUILDS = (
    ("insertion_costs", "kernels._insertion_costs_jit"),
    ("insertion_lower_bounds", "kernels._insertion_bounds_jit"),
    ("assign", "kernels._assign_jit"),
    ("pair scans", "kernels._pair_scan_jit"),
    ("sparse assignment", "kernels._sparse_assign_jit"),
    ("schedule", "kernels._schedule_jit"),
    ("improve", "kernels._improve_jit"),
    ("route edit", "kernels._route_edit_jit"),
)


def warm_up(announce: bool = False) -> None:
    """Compile (or load from Numba's on-disk cache) every compiled build, in this process;
    ``announce`` prints each build's name before it (a line each, for a parent to follow)."""
    for k, (name, module) in enumerate(_BUILDS, 1):
        if announce:
            print(f"{k}/{len(_BUILDS)}: {name}", flush=True)
        importlib.import_module(module).warm_up()


def cached_on_disk(module: types.ModuleType) -> bool:
    """Whether Numba's on-disk cache holds ``module``'s builds for its source as it is now:
    some cached function of it has an index and none has a stale one (a function called only
    from compiled code has no index of its own: it is built into its callers). Loading then
    compiles nothing, and no child process need compile first. A wrong True (a warm-up cut
    short) costs only time: this process compiles what was missing. Reads Numba's cache index,
    its own files written on this host, through a private method; a surprise there is False."""
    from numba.core.dispatcher import Dispatcher

    try:
        cached = [
            d._cache._cache_file
            for d in vars(module).values()
            if isinstance(d, Dispatcher) and d._cache._enabled
        ]
        indexed = [f for f in cached if Path(f._index_path).exists()]
        return bool(indexed) and all(f._load_index() for f in indexed)
    except Exception:  # another Numba's internals: take the safe path
        return False


def compile_in_child_then_load(
    modules: list[types.ModuleType],
    child_code: str,
    load: Callable[[], None],
    on_line: Callable[[str], None] | None = None,
    timeout_s: float = 600.0,
) -> None:
    """Load Numba builds into this process without compiling them here: where any of
    ``modules`` is not in Numba's on-disk cache, a child interpreter runs ``child_code`` (which
    compiles them into the cache; each line it prints goes to ``on_line``) and this process
    then calls ``load``, which only loads. Compiling holds the GIL for seconds, which would
    stall a replica's requests; loading a cached build takes moments. Raises what ``load``
    raises; a child that fails or passes ``timeout_s`` leaves ``load`` to compile."""
    if not all(map(cached_on_disk, modules)):
        child = subprocess.Popen(  # our own interpreter and modules
            [sys.executable, "-c", child_code],
            cwd=_REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert child.stdout is not None
        for line in child.stdout:
            if on_line is not None:
                on_line(line.strip())
        try:
            child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
    load()


def warm_up_in_background() -> threading.Thread:
    """Load the compiled builds off the request path; "auto" uses the loops until then.

    Replicas call this once they take traffic; library callers need not (their first call
    compiles). A child compiles what Numba's cache lacks (``compile_in_child_then_load``).
    """
    _warming.set()

    def stage(line: str) -> None:
        global _stage
        # A build already in Numba's cache loads in moments: the names pass by quickly.
        _stage = f"build {line}"

    def load() -> None:
        global _stage
        _stage = "loading the compiled builds"
        warm_up()

    def run() -> None:
        global _stage
        try:
            compile_in_child_then_load(
                [importlib.import_module(m) for _, m in _BUILDS],
                "from kernels.compiled import warm_up; warm_up(announce=True)",
                load,
                on_line=stage,
            )
        finally:
            _stage = ""
            _warming.clear()

    thread = threading.Thread(target=run, name="orml-jit-warm-up", daemon=True)
    thread.start()
    return thread
