"""``serve_app.http.lean_listener``: each Ingress replica serves the lanes' routes on a listener of
its own, which HAProxy finds in the registry and sends those routes to; the listener finishes
what it accepted when it stops."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest

from ops import local
from ops.hostile import order
from serve_app.http.lean_listener import PORTS_DIR_ENV, LeanListener, registered_ports


async def _slow_app(scope: dict, receive, send) -> None:
    if scope["type"] != "http":
        return
    if scope["path"].endswith("/slow"):
        await asyncio.sleep(0.5)
    body = json.dumps({"path": scope["path"], "root_path": scope.get("root_path", "")}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def test_not_started_unless_the_launcher_asked(monkeypatch):
    monkeypatch.delenv(PORTS_DIR_ENV, raising=False)
    assert not LeanListener.wanted()


def test_registers_serves_below_the_prefix_and_drains_on_stop(monkeypatch, tmp_path):
    monkeypatch.setenv(PORTS_DIR_ENV, str(tmp_path / "lean"))

    async def go() -> None:
        lean = LeanListener.start(_slow_app, "replica1", ("/v1/etr", "/slow"), graceful_s=5)
        assert lean is not None
        assert registered_ports(tmp_path / "lean") == {"replica1": lean.port}
        base = f"http://127.0.0.1:{lean.port}"
        async with httpx.AsyncClient() as client:
            got = (await client.post(f"{base}/secured/v1/etr")).json()
            assert got == {"path": "/secured/v1/etr", "root_path": "/secured"}
            got = (await client.post(f"{base}/v1/etr")).json()
            assert got == {"path": "/v1/etr", "root_path": ""}
            # Accepted before the stop: answered, though the listener stops meanwhile.
            slow = asyncio.create_task(client.get(f"{base}/slow"))
            await asyncio.sleep(0.1)
            await lean.stop()
            assert (await slow).status_code == 200
        assert registered_ports(tmp_path / "lean") == {}
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", lean.port), timeout=1).close()

    asyncio.run(go())


def test_haproxy_sends_the_lanes_to_the_replicas_own_listener(serve_url):
    assert local._haproxy_dir is not None
    ports = registered_ports(local._haproxy_dir / "lean")
    assert ports, "no Ingress replica registered a listener"

    def tracked_ports() -> set[int]:
        # Serve writes it below the configured path, in a directory of the HAProxy's own.
        path = max(local._haproxy_dir.rglob("haproxy.cfg"), key=lambda p: p.stat().st_mtime)
        return {
            int(line.split()[2].rsplit(":", 1)[1])
            for section in path.read_text().split("\nbackend ")[1:]
            if "-lane" in section.split()[0]
            for line in section.splitlines()
            if " track " in line
        }

    # The lane backends are written when the proxy next reloads after the replica registers
    # its listener: the first test of a session can read the config before that.
    deadline = time.monotonic() + 30
    while not (tracked := tracked_ports()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert tracked and tracked <= set(ports.values())
    body = {"orders": [order(0)]}
    via_proxy = httpx.post(f"{serve_url}/v1/etr", json=body, timeout=30)
    direct = httpx.post(f"http://127.0.0.1:{min(tracked)}/v1/etr", json=body, timeout=30)
    assert via_proxy.status_code == direct.status_code == 200
    assert via_proxy.json() == direct.json()
    # A refused body is refused alike: the same middlewares, the same error answer.
    bad = httpx.post(f"http://127.0.0.1:{min(tracked)}/v1/etr", json={"orders": [{}]}, timeout=30)
    assert bad.status_code == 422 and "orders" in bad.text
