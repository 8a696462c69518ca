"""The replication settings of broker.conf, and the roles a broker refuses to start with."""

from __future__ import annotations

import logging
import socket

import pytest

from rocketmq_core.broker.config import BrokerConfig
from rocketmq_core.broker.ha.progress import ReplicaProgress
from rocketmq_core.cli import main


@pytest.fixture
def rocketmq(capsys, caplog):
    """``rocketmq ARGS`` in this process: (exit status, stderr and the records logged)."""
    caplog.set_level(logging.WARNING)  # INFO may note the disk use of the test machine

    def invoke(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        caplog.clear()
        code = main(list(args))
        logged = "".join(f"{record.getMessage()}\n" for record in caplog.records)
        return code, capsys.readouterr().err + logged

    return invoke


@pytest.mark.parametrize(
    ("lines", "needles"),
    [
        (["brokerRole=SLAVE"], ["brokerRole is SLAVE but brokerId is 0", "brokerId=1"]),
        (["brokerId=2"], ["brokerRole is ASYNC_MASTER but brokerId is 2", "brokerRole=SLAVE"]),
        (["brokerRole=SYNC_MASTER", "brokerId=1"], ["brokerRole is SYNC_MASTER but brokerId"]),
        (
            ["brokerRole=SLAVE", "brokerId=1", "store=rocksdb"],
            ["brokerRole=SLAVE", "rocksdb store cannot replicate", "store=mmap"],
        ),
        (
            ["brokerRole=SYNC_MASTER", "store=rocksdb"],
            ["brokerRole=SYNC_MASTER", "rocksdb store cannot replicate"],
        ),
        (["haTransferBatchSize=0"], ["haTransferBatchSize must be between 1 and"]),
    ],
)
def test_a_role_that_cannot_work_is_one_line_and_exit_2(tmp_path, rocketmq, lines, needles):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"listenPort=0\nstorePathRootDir={tmp_path / 'store'}\n" + "\n".join(lines) + "\n"
    )
    code, err = rocketmq("broker", "-c", str(conf))
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_replication_keys_are_read_and_5x_gap_name_is_accepted(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerRole=SLAVE\nbrokerId=1\nhaMasterAddress=10.0.0.1:10912\nhaMaxGapNotInSync=4096\n"
        "slaveTimeout=700\nhaSendHeartbeatInterval=1000\nslaveReadEnable=true\n"
    )
    config = BrokerConfig.load(conf)
    config.validate()
    assert config.is_slave and config.replicates
    assert config.ha_master_address == "10.0.0.1:10912"
    assert config.ha_slave_fallbehind_max == 4096
    assert (config.slave_timeout, config.ha_send_heartbeat_interval) == (700, 1000)
    assert config.slave_read_enable is True
    assert config.ha_transfer_batch_size == 32768 and config.ha_housekeeping_interval == 20000
    assert config.access_message_in_memory_max_ratio == 40


def test_acks_wake_the_waiting_sends_in_offset_order_and_never_go_back():
    progress = ReplicaProgress(fallbehind_max=1000)
    assert not progress.slave_ok(10)  # no slave connected
    progress.connections = 1
    assert progress.slave_ok(999) and not progress.slave_ok(1000)
    woken: list[tuple[int, bool]] = []
    for end in (300, 100, 200):
        progress.wait(end, lambda acked, end=end: woken.append((end, acked)))
    progress.ack(200)
    assert woken == [(100, True), (200, True)] and progress.waiting == 1
    progress.ack(50)  # an older report from another slave
    assert progress.acked == 200
    progress.ack(300)
    assert woken == [(100, True), (200, True), (300, True)] and progress.waiting == 0
    assert progress.next_deadline() is None


def test_a_waiting_send_past_its_deadline_is_woken_once_with_false():
    progress = ReplicaProgress(fallbehind_max=1000)
    woken: list[tuple[int, bool]] = []
    for end, deadline in ((100, 1.0), (200, 2.0), (300, 3.0)):
        progress.wait(end, lambda acked, end=end: woken.append((end, acked)), deadline)
    assert progress.next_deadline() == 1.0
    progress.ack(100)  # acked before its deadline: the next one is the timer's
    assert progress.next_deadline() == 2.0
    progress.expire(1.5)
    assert woken == [(100, True)]
    progress.expire(2.0)  # at its deadline
    assert woken == [(100, True), (200, False)] and progress.waiting == 1
    progress.ack(250)  # passes the expired one: it is not woken again
    assert woken == [(100, True), (200, False)] and progress.next_deadline() == 3.0
    progress.ack(300)
    assert woken[-1] == (300, True) and progress.waiting == 0
    progress.expire(10.0)
    assert len(woken) == 3


def test_expired_waiters_do_not_pile_up_while_no_ack_comes():
    progress = ReplicaProgress(fallbehind_max=1000)
    for end in range(1, 10_001):
        progress.wait(end, lambda acked: None, deadline=end)
        progress.expire(end)
    assert progress.waiting == 0 and progress.next_deadline() is None
    assert len(progress._waiting) < 200


def test_an_ha_port_in_use_is_one_line_and_exit_2(tmp_path, rocketmq):
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(
            f"listenPort=0\nhaListenPort={port}\nstorePathRootDir={tmp_path / 'store'}\n"
        )
        code, err = rocketmq("broker", "-c", str(conf))
    assert code == 2, err
    # the store opened first: on a fullish test disk it may log its cleaning too
    errors = [line for line in err.splitlines() if line.startswith("rocketmq broker: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert f"haListenPort: cannot listen on 0.0.0.0:{port}" in errors[0] and "in use" in err
