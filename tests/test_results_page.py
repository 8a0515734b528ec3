"""The results page and the README's results table are what the benches' JSON gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_page_and_the_readme_table_come_from_the_json():
    got = subprocess.run(
        [sys.executable, "bench/results.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert got.returncode == 0, got.stdout + got.stderr


def test_every_source_names_its_machine_command_and_an_existing_json():
    import yaml

    for source in yaml.safe_load((ROOT / "docs/results/sources.yaml").read_text()):
        assert source["machine"] and source["command"].startswith(("python ", "bash ", "orml "))
        assert (ROOT / source["json"]).is_file()
