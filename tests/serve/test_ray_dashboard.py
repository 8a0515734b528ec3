"""The Ray dashboard's Serve page in a real browser: headless Chromium (Debian's package),
logged in with the cluster's token as Ray's own login does (its cookie), opens the page for the
running app and saves a screenshot; the deployments and their states are checked through the
dashboard's REST API, the data the page shows."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from ops.ports import free_port

DEPLOYMENTS = {"Ingress", "OrSolver", "Etr"}
SHOT = Path(__file__).resolve().parents[2] / "bench" / "out" / "ray-dashboard-serve.png"


def _token() -> str:
    return (Path.home() / ".ray" / "auth_token").read_text().strip()


def test_the_dashboard_api_lists_the_apps_deployments_running(serve_endpoints):
    base = serve_endpoints.dashboard
    headers = {"authorization": f"Bearer {_token()}"}
    assert httpx.get(f"{base}/api/serve/applications/", timeout=10).status_code == 401
    got = httpx.get(f"{base}/api/serve/applications/", headers=headers, timeout=30).json()
    app = got["applications"]["orml"]
    assert app["status"] == "RUNNING"
    states = {name: d["status"] for name, d in app["deployments"].items()}
    assert set(states) == DEPLOYMENTS and set(states.values()) == {"HEALTHY"}, states


class DevTools:
    """Just enough of the Chrome DevTools Protocol: send a command, wait for its answer."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.next_id = 0

    def __call__(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=60))
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg.get("result", {})


@pytest.fixture
def chromium(tmp_path):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        pytest.skip("chromium is not installed (.ci/run installs Debian's package)")
    port = free_port()
    proc = subprocess.Popen(
        [
            binary,
            "--headless=new",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--disable-dev-shm-usage",
            f"--remote-debugging-port={port}",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,900",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                pages = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=2).json()
                page = next(p for p in pages if p["type"] == "page")
                break
            except (httpx.HTTPError, StopIteration):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        from websockets.sync.client import connect

        with connect(page["webSocketDebuggerUrl"], max_size=64 << 20) as ws:
            yield DevTools(ws)
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_serve_page_shows_the_deployments_in_a_browser(serve_endpoints, chromium):
    base = serve_endpoints.dashboard
    chromium("Network.enable")
    chromium("Network.setCookie", name="ray-authentication-token", value=_token(), url=base)
    chromium("Page.enable")
    chromium("Page.navigate", url=f"{base}/#/serve")
    text, deadline = "", time.monotonic() + 60
    while time.monotonic() < deadline:
        got = chromium("Runtime.evaluate", expression="document.body.innerText")
        text = got.get("result", {}).get("value", "")
        if all(name in text for name in DEPLOYMENTS):
            break
        time.sleep(1)
    assert all(name in text for name in DEPLOYMENTS), text[:2000]
    shot = chromium("Page.captureScreenshot", format="png")
    SHOT.parent.mkdir(parents=True, exist_ok=True)
    SHOT.write_bytes(base64.b64decode(shot["data"]))
    assert SHOT.stat().st_size > 10_000
