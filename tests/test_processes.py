"""tests/processes.py picks broker ports no outgoing connection can take meanwhile."""

from __future__ import annotations

import socket

import pytest

from tests import processes
from tests.processes import ephemeral_ports, listen_port_with_free_neighbours


def test_listen_ports_lie_outside_the_ephemeral_range_with_free_neighbours():
    ephemeral = ephemeral_ports()
    picked = {listen_port_with_free_neighbours() for _ in range(20)}
    assert len(picked) > 1  # random, so parallel tests rarely pick the same
    for port in picked:
        for near in (port - 2, port, port + 1):
            assert near not in ephemeral
            with socket.socket() as probe:
                probe.bind(("0.0.0.0", near))


def test_the_kernels_range_is_read(tmp_path, monkeypatch):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("25000\t60999\n")
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE_FILE", range_file)
    assert ephemeral_ports() == range(25000, 61000)
    assert listen_port_with_free_neighbours() + 1 < 25000
    range_file.write_text("1024\t65535\n")
    with pytest.raises(pytest.fail.Exception, match="outside the ephemeral range 1024-65535"):
        listen_port_with_free_neighbours()
