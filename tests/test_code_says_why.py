"""The code carries no results and no history: no dates, no citations of the benchmark notebook
(figures live on the results page, rendered from the benches' JSON)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("actors", "cache", "cli", "config", "devices", "domain", "etr", "fleet")
PACKAGES += ("kernels", "ops", "placement", "planner", "serve_app")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def sources() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def test_no_module_carries_a_date_or_cites_the_notebook():
    found = []
    for path in sources():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if DATE.search(line) or "benchmarks.md" in line:
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert found == []
