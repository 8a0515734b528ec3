"""The Grafana dashboard only charts metrics the app defines (or Serve's built-ins)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DASHBOARD = Path(__file__).resolve().parents[1] / "docs/grafana/orml-serve.json"
ROOT = Path(__file__).resolve().parents[1]
METRICS_SRC = [
    ROOT / "actors/model_metrics.py",
    ROOT / "actors/replica_load.py",
    ROOT / "serve_app/ingress_metrics.py",
]


def test_dashboard_metrics_exist():
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    ours = {m for e in exprs for m in re.findall(r"ray_(orml_[a-z_]+?)(?:_bucket|_total)?\{", e)}
    defined = {m for src in METRICS_SRC for m in re.findall(r'"(orml_[a-z_]+)"', src.read_text())}
    assert ours and ours <= defined, ours - defined
    assert all(("ray_serve_" in e) or ("ray_orml_" in e) for e in exprs)
