"""``ops.ports.free_ports``: ports a test or bench binds a moment later, chosen where no
outgoing connection can take them first."""

from __future__ import annotations

import socket

from ops import ports


def test_ports_are_distinct_free_and_above_the_kernels_own_range():
    got = ports.free_ports(8)
    assert len(set(got)) == 8
    assert all(ports._bindable(p) for p in got)
    above = ports._above_ephemeral()
    if above is not None:  # the kernel leaves room above its ephemeral range (Linux: 61000+)
        assert all(above[0] <= p < above[1] for p in got)


def test_a_taken_port_is_never_given(monkeypatch, tmp_path):
    (tmp_path / "range").write_text("32768\t65529\n")  # six ports above: room for none
    monkeypatch.setattr(ports, "MIN_ABOVE_EPHEMERAL", 6)
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", tmp_path / "range")
    held = []
    for port in range(65530, 65536):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            continue
        held.append(s)
    try:
        taken = {s.getsockname()[1] for s in held}
        got = ports.free_ports(3)
        assert not taken & set(got) and len(set(got)) == 3
    finally:
        for s in held:
            s.close()


def test_without_room_above_the_kernel_chooses(monkeypatch, tmp_path):
    (tmp_path / "range").write_text("1024 65535\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", tmp_path / "range")
    assert ports._above_ephemeral() is None
    got = ports.free_ports(3)
    assert len(set(got)) == 3 and all(ports._bindable(p) for p in got)
