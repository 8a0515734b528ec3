"""The Grafana dashboard only charts metrics the app defines (or Serve's built-ins)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[1] / "docs/grafana/orml-serve.json"
METRICS_SRC = Path(__file__).resolve().parents[1] / "actors/metrics.py"


def test_dashboard_metrics_exist():
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    ours = {m for e in exprs for m in re.findall(r"ray_(orml_[a-z_]+?)(?:_bucket|_total)?\{", e)}
    defined = set(re.findall(r'"(orml_[a-z_]+)"', METRICS_SRC.read_text()))
    assert ours and ours <= defined, ours - defined
    assert all(("ray_serve_" in e) or ("ray_orml_" in e) for e in exprs)
