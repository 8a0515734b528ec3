"""What every bench script shares: the standard flags and progress logging to stderr."""

from __future__ import annotations

import argparse
import csv
import resource
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).parent / "out"


def parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
    """``--quick``, ``--json PATH`` and ``--out DIR`` (created), described from the docstring."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--json", type=Path, help="also write every result as JSON here")
    ap.add_argument("--out", type=Path, default=OUT, help="where the CSV and PNG go")
    return ap


def log(msg: str) -> None:
    """Progress goes to stderr so the table on stdout stays clean."""
    print(msg, file=sys.stderr, flush=True)


def write_csv(path: Path, rows: list[dict]) -> None:
    """Rows as CSV, columns the union of the rows' keys (first-seen order)."""
    fields = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def run_hey(url: str, body_path: Path, args: list[str]) -> tuple[str, float]:
    """One ``hey`` run POSTing the JSON in ``body_path`` to ``url`` with ``args`` (``-z``,
    ``-c``, ``-q``, ``-o csv``, ...): its output and the CPU seconds it used (the generator
    shares the box with the server, so benches report it)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        ["hey", *args, "-m", "POST", "-T", "application/json", "-D", str(body_path), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
