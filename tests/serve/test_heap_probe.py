"""Memory: the heap probe finds where Python memory grew (in-process and in the ingress), and
Serve's processes run with the malloc settings that keep their RSS flat."""

from __future__ import annotations

import inspect

import httpx
import pytest

from serve_app.heap_probe import HeapProbe


def test_the_probe_names_the_line_that_grew():
    probe = HeapProbe()
    try:
        assert probe.growth()["top"] == []  # the first call only starts tracing
        line = inspect.currentframe().f_lineno + 1
        kept = [bytes(1000) for _ in range(2000)]  # ~2 MB from this line
        report = probe.growth(limit=5)
        top = report["top"][0]
        assert top["where"] == f"{__file__}:{line}", report
        assert top["grew_kb"] > 1800 and top["count_grew"] >= 2000
        assert report["traced_mb"] >= 1.9
        del kept
    finally:
        probe.stop()


@pytest.mark.serve
def test_the_ingress_reports_its_heap_growth_through_the_handle(serve_url):
    from ray import serve

    ingress = serve.get_app_handle("orml")
    try:
        first = ingress.heap_growth.remote().result(timeout_s=30)
        assert first["top"] == [] and first["tracing_since"] > 0
        with httpx.Client(base_url=serve_url, timeout=30) as c:
            for _ in range(5):
                assert c.get("/healthz").status_code == 200
        later = ingress.heap_growth.remote(limit=3).result(timeout_s=30)
        assert later["tracing_since"] == first["tracing_since"] and len(later["top"]) <= 3
        assert all({"where", "grew_kb", "count_grew", "size_kb"} <= set(r) for r in later["top"])
    finally:
        ingress.heap_stop.remote().result(timeout_s=30)


@pytest.mark.serve
def test_serve_processes_run_with_two_malloc_arenas(serve_url):
    import psutil

    from ops.local import PROCESS_ENV

    replicas = [
        p
        for p in psutil.process_iter(["cmdline"])
        if " ".join(p.info["cmdline"] or []).startswith("ray::ServeReplica:orml:")
    ]
    assert {" ".join(p.info["cmdline"]).split()[0].split(".")[0] for p in replicas} >= {
        "ray::ServeReplica:orml:Ingress",
        "ray::ServeReplica:orml:OrSolver",
        "ray::ServeReplica:orml:Etr",
    }
    for p in replicas:
        env = p.environ()
        assert {k: env.get(k) for k in PROCESS_ENV} == PROCESS_ENV, p.info["cmdline"]
