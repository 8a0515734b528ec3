"""``kernels.compiled.cached_on_disk``: a replica skips the compiling child only when Numba's
on-disk cache already holds the module's builds."""

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
