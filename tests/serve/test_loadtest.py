"""``orml loadtest`` against a real app over HTTP and gRPC: steps, a table, CSV and PNG, and it
stops by itself."""

from __future__ import annotations

import csv

from cli.main import main
from ops.loadtest import requests_for
from tests.mdrp_days import DAY


def test_a_concurrency_sweep_writes_a_table_csv_and_png(serve_url, tmp_path, capsys):
    out = tmp_path / "lt"
    args = ["loadtest", serve_url, "--endpoint", "etr", "--concurrency", "1", "4"]
    assert main([*args, "--duration", "1", "--requests", "8", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| concurrency 1 |" in table
    rows = list(csv.DictReader((out / "loadtest.csv").open()))
    assert 1 <= len(rows) <= 2
    assert all(float(r["throughput_rps"]) > 0 and int(r["errors"]) == 0 for r in rows)
    assert (out / "loadtest.png").stat().st_size > 0


def test_it_stops_at_the_first_step_past_the_latency_limit(serve_url, tmp_path):
    out = tmp_path / "lt"
    args = ["loadtest", serve_url, "--rate", "5", "10", "20", "--duration", "1"]
    assert main([*args, "--stop-p99-ms", "0.001", "--requests", "4", "--out", str(out)]) == 0
    assert len(list(csv.DictReader((out / "loadtest.csv").open()))) == 1


def test_a_real_days_rounds_are_the_requests():
    reqs = requests_for("dispatch", "http://127.0.0.1:8000", count=5, mdrp_day=DAY)
    assert len(reqs) == 5
    assert all(r.startswith(b"POST /v1/dispatch HTTP/1.1") for r in reqs)
    assert b'"etr_floor":false' in reqs[0]


def test_a_grpc_sweep_calls_the_same_api(grpc_address, tmp_path, capsys):
    out = tmp_path / "lt"
    args = ["loadtest", grpc_address, "--grpc", "--endpoint", "dispatch", "--riders", "20"]
    assert main([*args, "--concurrency", "1", "2", "--duration", "1", "--out", str(out)]) == 0
    rows = list(csv.DictReader((out / "loadtest.csv").open()))
    assert rows and all(float(r["throughput_rps"]) > 0 and int(r["errors"]) == 0 for r in rows)
    assert "| concurrency 1 |" in capsys.readouterr().out
