"""Where the session's app listens: every port of a local cluster from its own block, the
HTTP listeners on the configured host (127.0.0.1 here)."""

from __future__ import annotations

import psutil


def _listening(port: int) -> set[str]:
    return {
        c.laddr.ip
        for c in psutil.net_connections("tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }


def test_serves_fallback_proxy_listens_on_the_clusters_own_ports(serve_endpoints):
    assert serve_endpoints.fallback_proxy is not None
    http, grpc = serve_endpoints.fallback_proxy
    assert _listening(http) == {"127.0.0.1"}
    # Serve binds its gRPC servers on every interface whatever the host (docs/deploy.md).
    assert _listening(grpc)
    assert not _listening(8500) and not _listening(9500)
