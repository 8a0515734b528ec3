"""Counts that arrive: the requests an ingress answered reach Prometheus (Ray's metrics
export, what Prometheus scrapes) within seconds of the last of them, with no request after
them to carry them."""

from __future__ import annotations

import time

import httpx

#: What the test allows: the ingress's flush (1 s) and Ray's metrics export (2 s), with room
#: for a loaded box (measured: 3.1 s; before the flush was scheduled they never arrived
#: without another request).
ARRIVE_WITHIN_S = 8.0


def bulk_422s(metrics_url: str) -> float:
    text = httpx.get(metrics_url, timeout=10).text
    total = 0.0
    for line in text.splitlines():
        ours = line.startswith("ray_orml_requests_total{") and 'endpoint="/v1/etr/bulk"' in line
        if ours and 'status="422"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_five_bad_bodies_are_counted_in_prometheus_within_seconds(serve_endpoints):
    before = bulk_422s(serve_endpoints.metrics)
    for _ in range(5):
        got = httpx.post(
            f"{serve_endpoints.http}/v1/etr/bulk",
            content=b'{"orders": "no"}',
            headers={"content-type": "application/json"},
            timeout=30,
        )
        assert got.status_code == 422
    sent = time.monotonic()
    seen = before
    while seen < before + 5 and time.monotonic() - sent < 30:
        time.sleep(0.25)
        seen = bulk_422s(serve_endpoints.metrics)
    took = time.monotonic() - sent
    print(f"5 requests counted in Prometheus {took:.1f} s after the last")
    assert seen == before + 5, f"{seen - before} of 5 counted after {took:.1f} s"
    assert took <= ARRIVE_WITHIN_S, f"counted after {took:.1f} s"
