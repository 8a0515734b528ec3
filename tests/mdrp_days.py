"""Real MDRP days for the tests: the repository's sample day, and its morning (a short replay)."""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "mdrp"
DAY = DATA / "0o50t100s1p100"


def morning(folder: Path, orders: int = 40) -> Path:
    """``DAY``'s first ``orders`` orders and every courier, copied to ``folder``: a short,
    real replay."""
    shutil.copytree(DAY, folder)
    lines = (DAY / "orders.txt").read_text().splitlines()
    head, body = lines[0], sorted(lines[1:], key=lambda ln: int(ln.split("\t")[3]))
    (folder / "orders.txt").write_text("\n".join([head, *body[:orders]]) + "\n")
    return folder
