"""``ops.haproxy_config``: Serve's generated HAProxy config, rewritten as ``orml serve`` runs
it, is valid for the real HAProxy binary and sheds each lane's excess at the proxy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ops.haproxy_config import (
    BUFFER_BYTES,
    LANES_ENV,
    QUEUE_MS,
    QUEUE_MS_ENV,
    REAL_BINARY_ENV,
    SERVE_DEFAULTS_ENV,
    proxy_threads,
    rewrite,
)
from serve_app.config import AdmissionArgs
from serve_app.http_routes import lane_capacities

SERVE_CONFIG = Path(__file__).parent / "data" / "serve_haproxy.cfg"


@pytest.fixture
def config(tmp_path: Path) -> str:
    (tmp_path / "500.http").write_text("HTTP/1.1 500 Internal Server Error\r\n\r\n")
    return SERVE_CONFIG.read_text().replace("{workdir}", str(tmp_path))


def test_stats_and_metrics_listen_on_loopback_only(config):
    out = rewrite(config, {})
    binds = [line.split()[1] for line in out.splitlines() if line.strip().startswith("bind")]
    assert binds and all(b.startswith("127.0.0.1:") for b in binds), binds


def test_each_lane_gets_a_backend_capped_at_its_capacity_before_the_apps_rule(config):
    lanes = lane_capacities(AdmissionArgs())
    out = rewrite(config, lanes)
    rules = [line.strip() for line in out.splitlines() if line.strip().startswith("use_backend")]
    app_rule = rules.index("use_backend http-orml if is_http-orml")
    lane_rules = [r for r in rules if "-lane" in r]
    assert len(lane_rules) == len(lanes) and all(rules.index(r) < app_rule for r in lane_rules)
    assert "use_backend http-orml-lane0 if is_http-orml { path /v1/dispatch }" in rules
    for k, (_, capacity) in enumerate(sorted(lanes.items())):
        section = out.split(f"backend http-orml-lane{k}\n")[1].split("\nbackend ")[0]
        servers = [s for s in section.splitlines() if s.strip().startswith("server ")]
        primary = [s for s in servers if "backup" not in s]
        assert primary and all(s.endswith(f"maxconn {capacity}") for s in primary)
        assert f"timeout queue {QUEUE_MS}ms" in section and "Retry-After 1" in section


def test_lanes_read_bodies_whole_and_do_not_log_their_own_sheds(config):
    lanes = lane_capacities(AdmissionArgs())
    out = rewrite(config, lanes)
    assert f"    tune.bufsize {BUFFER_BYTES}\n" in out
    for k, (_, capacity) in enumerate(sorted(lanes.items())):
        section = out.split(f"backend http-orml-lane{k}\n")[1].split("\nbackend ")[0]
        shedding = capacity is not None
        assert ("option http-buffer-request" in section) == shedding
        assert ("set-log-level silent if { res.hdr(x-shed) -m found }" in section) == shedding
        assert ("hdr X-Shed proxy" in section) == shedding
    # Only the shedding lanes: Serve's own backends log and stream as Serve configured them.
    shedding_lanes = sum(capacity is not None for capacity in lanes.values())
    assert out.count("http-buffer-request") == shedding_lanes
    assert out.count("res.hdr(x-shed)") == shedding_lanes
    # As Serve configured it, for comparison (bench/overload.py --proxy-serve-defaults).
    before = rewrite(config, lanes, cheap_sheds=False)
    assert "    tune.bufsize 16384\n" in before
    assert "http-buffer-request" not in before and "set-log-level silent if { res" not in before


def test_proxy_threads_leave_the_replicas_their_cores():
    assert [proxy_threads(n) for n in (1, 2, 3, 8, 64)] == [1, 1, 1, 4, 32]


def test_the_rewritten_config_is_valid_for_the_real_haproxy(config, tmp_path):
    from ray.serve._private.haproxy import get_haproxy_binary

    path = tmp_path / "haproxy.cfg"
    path.write_text(rewrite(config, lane_capacities(AdmissionArgs())))
    check = subprocess.run(
        [get_haproxy_binary(), "-c", "-f", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_lane_servers_point_at_the_replicas_own_listeners_where_registered(config, tmp_path):
    from ray.serve._private.haproxy import get_haproxy_binary

    from serve_app.lean_listener import registered_ports

    ports = tmp_path / "lean"
    ports.mkdir()
    (ports / "02inp9y5").write_text("24001\n")
    (ports / "gone1234").write_text("24002\n")  # a replica no longer in the config
    (ports / "broken").write_text("not a port")
    assert registered_ports(ports) == {"02inp9y5": 24001, "gone1234": 24002}
    out = rewrite(config, lane_capacities(AdmissionArgs()), lean_ports=registered_ports(ports))
    lanes = out.split("\nbackend http-orml-lane")[1:]
    assert lanes
    for section in lanes:
        server = next(s.split() for s in section.splitlines() if "SERVE_REPLICA_" in s)
        assert server[2] == "127.0.0.1:24001"
        assert server[3:6] == ["no-check", "track", "http-orml/SERVE_REPLICA_orml-Ingress-02inp9y5"]
    # Serve's own backend, and gRPC's, are untouched.
    app = out.split("backend http-orml\n")[1].split("\nbackend ")[0]
    assert "127.0.0.1:23264 check" in app
    assert "24001" not in out.split("\nbackend http-orml-lane")[0]
    path = tmp_path / "haproxy.cfg"
    path.write_text(out)
    check = subprocess.run(
        [get_haproxy_binary(), "-c", "-f", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("queue_ms", [None, 7])
def test_the_wrapper_sets_the_lanes_queue_time(config, tmp_path, queue_ms):
    """The wrapper Serve runs as its HAProxy rewrites the config file in place, with the lanes'
    queue time from ``QUEUE_MS_ENV`` where set, then runs the real binary."""
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(config)
    env = {
        **os.environ,
        LANES_ENV: json.dumps({"/v1/dispatch": 12}),
        REAL_BINARY_ENV: "/bin/true",
        SERVE_DEFAULTS_ENV: "0",
    }
    env.pop(QUEUE_MS_ENV, None)
    if queue_ms is not None:
        env[QUEUE_MS_ENV] = str(queue_ms)
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [sys.executable, "-m", "ops.haproxy_config", "-f", str(cfg)],
        env=env,
        cwd=root,
        check=True,
        timeout=60,
    )
    section = cfg.read_text().split("backend http-orml-lane0\n")[1].split("\nbackend ")[0]
    assert f"timeout queue {queue_ms or QUEUE_MS}ms" in section
