"""rocketmq_core.testing.ports picks server ports no outgoing connection can take meanwhile."""

from __future__ import annotations

import socket

import pytest

from rocketmq_core.testing import ports
from rocketmq_core.testing.ports import NoFreePort, ephemeral_ports, free_offset, free_port
from tests.processes import listen_port_with_free_neighbours


def test_listen_ports_lie_outside_the_ephemeral_range_with_free_neighbours():
    ephemeral = ephemeral_ports()
    picked = {listen_port_with_free_neighbours() for _ in range(20)}
    assert len(picked) > 1  # random, so parallel tests rarely pick the same
    for port in picked:
        for near in (port - 2, port, port + 1):
            assert near not in ephemeral
            with socket.socket() as probe:
                probe.bind(("0.0.0.0", near))


def test_an_offset_moves_a_whole_layout_to_free_ports_outside_the_range():
    layout = [9876, 10909, 10910, 10911, 10912, 10941, 10942]
    offset = free_offset(layout)
    for port in layout:
        assert port + offset not in ephemeral_ports()
        assert ports.is_free(port + offset)


def test_a_taken_port_is_not_picked(tmp_path, monkeypatch):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("1024\t1025\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", range_file)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        monkeypatch.setattr(ports, "PICKED_PORTS", (port, port + 1))  # the only one
        with pytest.raises(NoFreePort, match="no free ports"):
            free_port()
    assert free_port() == port  # free again


def test_the_kernels_range_is_read(tmp_path, monkeypatch):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("25000\t60999\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", range_file)
    assert ephemeral_ports() == range(25000, 61000)
    assert listen_port_with_free_neighbours() + 1 < 25000
    range_file.write_text("1024\t65535\n")
    with pytest.raises(NoFreePort, match="outside the ephemeral range 1024-65535"):
        listen_port_with_free_neighbours()


def test_a_port_whose_neighbour_is_taken_is_not_picked(tmp_path, monkeypatch):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("1024\t1025\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", range_file)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        monkeypatch.setattr(ports, "PICKED_PORTS", (port - 1, port + 1))
        with pytest.raises(NoFreePort, match="no free ports"):
            free_port(neighbours=(1,))  # the only candidate, port - 1, has port next to it


def test_neighbours_in_the_ephemeral_range_are_not_picked(tmp_path, monkeypatch):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("25000\t60999\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", range_file)
    monkeypatch.setattr(ports, "PICKED_PORTS", (24990, 25002))
    picked = {free_port(neighbours=(-2, 1)) for _ in range(30)}
    assert picked <= set(range(24992, 24999))  # 24999's + 1 is the kernel's
