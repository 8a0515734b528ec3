"""The ports of a local cluster: a block of its own, chosen free, and the environment that
points Serve's listeners into it; free ports for anything else a test or bench starts.

Each local start takes one block of ``CLUSTER_BLOCK`` ports (``cluster_port_block``), so two
clusters on one machine, or a cluster and anything else there, never collide on Serve's fixed
defaults.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Mapping
from pathlib import Path

#: Ports per protocol for one local cluster's ingress replicas (see ``cluster_port_block``).
DIRECT_INGRESS_BLOCK = 50
#: A local cluster's own ports: its ingress replicas' (HTTP, then gRPC), then HAProxy's stats
#: and metrics ports, then the cluster's HTTP, gRPC and Ray metrics ports (``OWN_PORTS``),
#: then the HTTP and gRPC ports of Serve's fallback proxy (``fallback_proxy_env``).
CLUSTER_BLOCK = 2 * DIRECT_INGRESS_BLOCK + 7
OWN_PORTS = 2 * DIRECT_INGRESS_BLOCK + 2  # offset of the HTTP port in the block
#: Where those blocks are taken from: below Linux's ephemeral ports (32768+, which outgoing
#: connections take at any moment: a port found free there can be gone when HAProxy binds it)
#: and Serve's own ranges (30000-31000 HTTP, 40000-41000 gRPC).
CLUSTER_PORT_RANGE = (20000, 30000)


def cluster_port_block(rng: random.Random | None = None) -> int:
    """The first of ``CLUSTER_BLOCK`` ports of this local cluster's own, all free now.

    Serve gives each ingress replica an HTTP and a gRPC port from fixed ranges (30000-31000,
    40000-41000), lowest first, per cluster, and binds the gRPC one with SO_REUSEPORT: with
    three local clusters running, `ss` showed three ingress replicas listening on 40000, and
    every gRPC request to one cluster could be answered by another's (seen: a test app
    answering every 5th request, its gRPC ones, with the other cluster's model version). Each
    cluster started here takes a block chosen at random among those of
    ``CLUSTER_PORT_RANGE`` with no port bound now (``direct_ingress_env`` and HAProxy's ports
    come from it). RuntimeError when there is none.
    """
    rng = rng or random.Random()
    low, high = CLUSTER_PORT_RANGE
    bases = list(range(low, high - CLUSTER_BLOCK + 1, CLUSTER_BLOCK))
    rng.shuffle(bases)
    for base in bases:
        if all(_bindable(port) for port in range(base, base + CLUSTER_BLOCK)):
            return base
    raise RuntimeError(f"no block of {CLUSTER_BLOCK} free ports in {low}-{high}")


def direct_ingress_env(base: int) -> dict[str, str]:
    """Serve's ingress-replica port ranges, from the block at ``base`` (cluster_port_block)."""
    grpc = base + DIRECT_INGRESS_BLOCK
    return {
        "RAY_SERVE_DIRECT_INGRESS_MIN_HTTP_PORT": str(base),
        "RAY_SERVE_DIRECT_INGRESS_MAX_HTTP_PORT": str(grpc - 1),
        "RAY_SERVE_DIRECT_INGRESS_MIN_GRPC_PORT": str(grpc),
        "RAY_SERVE_DIRECT_INGRESS_MAX_GRPC_PORT": str(grpc + DIRECT_INGRESS_BLOCK - 1),
    }


FALLBACK_HTTP, FALLBACK_GRPC = (
    "RAY_SERVE_FALLBACK_PROXY_HTTP_PORT",
    "RAY_SERVE_FALLBACK_PROXY_GRPC_PORT",
)


def fallback_proxy_env(base: int) -> dict[str, str]:
    """The ports of the proxy Serve keeps on the head node beside HAProxy (fixed at 8500 and
    9500 otherwise: a second cluster on the machine, or anything else there, would collide),
    from the block at ``base``."""
    return {FALLBACK_HTTP: str(base + OWN_PORTS + 3), FALLBACK_GRPC: str(base + OWN_PORTS + 4)}


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


#: The kernel's own range for ports nobody named (outgoing connections, binds to port 0).
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: Ports above the ephemeral range ``free_ports`` wants at least, else it takes the kernel's.
MIN_ABOVE_EPHEMERAL = 1000


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    return free_ports(1)[0]


def free_ports(n: int, rng: random.Random | None = None) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 now, for a server started a moment later.

    Chosen at random above the kernel's ephemeral range (where it has room), not from it: a
    port the kernel hands out for the asking can be taken by any outgoing connection before
    the server binds it (seen: `orml serve` refusing a metrics port a test had just found
    free). All are held open until all are chosen, so none is given twice.
    """
    rng = rng or random.Random()
    sockets: list[socket.socket] = []
    try:
        above = _above_ephemeral()
        candidates = rng.sample(range(*above), len(range(*above))) if above else []
        for port in candidates:
            if len(sockets) == n:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        while len(sockets) < n:  # no room above: the kernel's choice
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _above_ephemeral() -> tuple[int, int] | None:
    """[low, high) of the ports above the kernel's ephemeral range, or None (unknown, or
    fewer than ``MIN_ABOVE_EPHEMERAL`` of them)."""
    try:
        high = int(EPHEMERAL_RANGE_FILE.read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    if 65535 - high < MIN_ABOVE_EPHEMERAL:
        return None
    return high + 1, 65536


def check_ports_free(ports: Mapping[str, int], host: str = "0.0.0.0") -> None:
    """RuntimeError naming every port something already listens on (a stale server?)."""
    taken = []
    for what, port in ports.items():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                taken.append(f"{what} port {port}")
    if taken:
        raise RuntimeError(
            f"{', '.join(taken)} already in use: another orml serve or a stale listener "
            f"(see `ss -ltnp`); stop it or choose other ports"
        )
