"""``kernels.compiled.cached_on_disk``: a replica skips the compiling child only when Numba's
on-disk cache already holds the module's builds; ``compile_in_child_then_load`` runs the child
for what it lacks, then loads here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
from kernels import compiled
from kernels import _schedule_jit as m
before = compiled.cached_on_disk(m)
m.warm_up()
print(before, compiled.cached_on_disk(m))
"""


def test_a_cold_cache_is_not_taken_for_a_warm_one(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    run = [sys.executable, "-c", PROBE]
    cold = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert cold.returncode == 0, cold.stderr[-2000:]
    assert cold.stdout.split() == ["False", "True"]  # empty, then built
    warm = subprocess.run(run, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert warm.stdout.split() == ["True", "True"]  # a new process finds it built


def test_a_module_without_compiled_functions_is_not_cached():
    from kernels import compiled

    assert not compiled.cached_on_disk(compiled)


def test_what_the_cache_lacks_is_compiled_by_a_child_then_loaded_here():
    """``compile_in_child_then_load``: a module with builds not on disk (here one with none)
    sends the child's printed lines to ``on_line`` and then loads in this process; a child
    that fails still leaves the load to this process."""
    import types

    from kernels import compiled

    empty = types.ModuleType("no_builds")
    lines: list[str] = []
    loads: list[int] = []
    compiled.compile_in_child_then_load(
        [empty],
        "print('build 1/2: a'); print('build 2/2: b')",
        lambda: loads.append(1),
        lines.append,
    )
    assert lines == ["build 1/2: a", "build 2/2: b"] and loads == [1]
    compiled.compile_in_child_then_load([empty], "raise SystemExit(3)", lambda: loads.append(2))
    assert loads == [1, 2]
