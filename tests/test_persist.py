"""persist.atomic_write: whole files, and permission bits that never widen."""

from __future__ import annotations

import os
import stat

import anyio
import pytest

from rocketmq_core.persist import SECRET_FILE_MODE, atomic_write
from rocketmq_core.testing.broker import broker_config


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_an_existing_file_keeps_its_mode(tmp_path, umask_022):
    target = tmp_path / "plain_acl.yml"
    target.write_text("accounts: []\n")
    for kept in (0o600, 0o640, 0o604):
        target.chmod(kept)
        atomic_write(target, b"accounts: [x]\n")
        atomic_write(target, b"accounts: [y]\n", mode=SECRET_FILE_MODE)  # the file's mode wins
        assert (mode_of(target), target.read_bytes()) == (kept, b"accounts: [y]\n")
    assert [p.name for p in tmp_path.iterdir()] == ["plain_acl.yml"]  # no temporary left


def test_a_new_file_gets_the_given_mode_else_the_default(tmp_path, umask_022):
    atomic_write(tmp_path / "secret.yml", b"s", mode=SECRET_FILE_MODE)
    assert mode_of(tmp_path / "secret.yml") == 0o600
    atomic_write(tmp_path / "offsets.json", b"{}")
    assert mode_of(tmp_path / "offsets.json") == 0o644  # as before: 0o666 less the umask


def test_the_persisted_broker_config_is_owner_only(tmp_path, umask_022):
    path = tmp_path / "broker.properties"
    anyio.run(broker_config(tmp_path / "store").save, path)
    assert mode_of(path) == 0o600
    assert "brokerName=broker-a" in path.read_text()
