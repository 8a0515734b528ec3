"""A real ``orml serve`` in a subprocess, for tests that need the launcher itself."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def orml_serve(
    argv: list[str], env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``argv`` (an ``orml serve`` command) in the repository until it prints that it
    serves, yielding its process; stop it with SIGTERM on exit (SIGKILL to its group after
    90 s; its ``returncode`` is then set). The output goes to ``log``; its tail is the
    assertion message when it dies or takes over 240 s to start."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 240
        while "SIGTERM stops" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "orml serve did not come up"
            time.sleep(1)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
