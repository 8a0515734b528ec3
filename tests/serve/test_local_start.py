"""Starting the local cluster rides out what a loaded host does to Serve's start."""

from __future__ import annotations

from ops import local


def test_a_proxy_replaced_during_start_is_waited_for_not_fatal(serve_endpoints, monkeypatch):
    """On a loaded host Serve's controller can kill a proxy that missed its readiness checks and
    start another; ``serve.start``, waiting on the first, raises its death. The start then waits
    for the controller's proxies (here the session's, healthy) instead of failing."""
    from ray import serve
    from ray.exceptions import ActorDiedError

    calls = []

    def start_whose_proxy_died(**options):
        calls.append(options)
        raise ActorDiedError()

    monkeypatch.setattr(serve, "start", start_whose_proxy_died)
    local._start_serve(http_options={"host": "127.0.0.1"})
    assert len(calls) == 1
    proxies = serve.status().proxies
    assert proxies and all(getattr(s, "value", s) == "HEALTHY" for s in proxies.values())
