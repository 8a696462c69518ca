"""rocketmq_core.testing.ports picks server ports no outgoing connection can take meanwhile."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from rocketmq_core.testing import ports
from rocketmq_core.testing.ports import NoFreePort, ephemeral_ports, free_offset, free_port
from tests.processes import listen_port_with_free_neighbours


@pytest.fixture
def kernel_range(tmp_path, monkeypatch) -> Callable[[int, int], None]:
    """Sets the ephemeral range the kernel is read to have: ``kernel_range(low, high)``."""
    range_file = tmp_path / "ip_local_port_range"
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE_FILE", range_file)

    def set_range(low: int, high: int) -> None:
        range_file.write_text(f"{low}\t{high}\n")

    return set_range


@contextmanager
def taken_port() -> Iterator[int]:
    """A port bound (so taken) while inside."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        yield taken.getsockname()[1]


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


def test_a_taken_port_is_not_picked(kernel_range, monkeypatch):
    kernel_range(1024, 1025)
    with taken_port() as port:
        monkeypatch.setattr(ports, "PICKED_PORTS", (port, port + 1))  # the only one
        with pytest.raises(NoFreePort, match="no free ports"):
            free_port()
    assert free_port() == port  # free again


def test_the_kernels_range_is_read(kernel_range):
    kernel_range(25000, 60999)
    assert ephemeral_ports() == range(25000, 61000)
    assert listen_port_with_free_neighbours() + 1 < 25000
    kernel_range(1024, 65535)
    with pytest.raises(NoFreePort, match="outside the ephemeral range 1024-65535"):
        listen_port_with_free_neighbours()


def test_a_port_whose_neighbour_is_taken_is_not_picked(kernel_range, monkeypatch):
    kernel_range(1024, 1025)
    with taken_port() as port:
        monkeypatch.setattr(ports, "PICKED_PORTS", (port - 1, port + 1))
        with pytest.raises(NoFreePort, match="no free ports"):
            free_port(neighbours=(1,))  # the only candidate, port - 1, has port next to it


def test_neighbours_in_the_ephemeral_range_are_not_picked(kernel_range, monkeypatch):
    kernel_range(25000, 60999)
    monkeypatch.setattr(ports, "PICKED_PORTS", (24990, 25002))
    picked = {free_port(neighbours=(-2, 1)) for _ in range(30)}
    assert picked <= set(range(24992, 24999))  # 24999's + 1 is the kernel's
