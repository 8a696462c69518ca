"""``rocketmq cluster up``: the 2m-2s-async example layout started as real processes
(ports moved by --port-offset, data in a temp dir), replicating, listed by
``rocketmq cluster list``, and stopped by SIGTERM; bad layouts refused in one line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketmq_core.cli import main
from rocketmq_core.client import sync
from rocketmq_core.client.message import Message
from rocketmq_core.protocol.message import decode_offset_msg_id, offset_msg_id, pack_host
from rocketmq_core.testing.ports import free_offset

LAYOUT = Path(__file__).parent.parent / "examples" / "conf" / "2m-2s-async"
LISTEN_PORTS = (10911, 10921, 10931, 10941)  # the layout's, as its files say
READY = re.compile(r"ready: name server (\S+);(.*)$")
MEMBER = re.compile(r"(broker-[ab])/(\d) (\S+) (\w+) pid (\d+)")


def free_port_offset() -> int:
    """An offset at which the name server's and every broker's ports are free."""
    return free_offset([9876, *(port + delta for port in LISTEN_PORTS for delta in (-2, -1, 0, 1))])


class ClusterUp:
    def __init__(self, data_dir: Path) -> None:
        self.log = data_dir.parent / "cluster-up.err"
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "rocketmq_core.cli", "cluster", "up", str(LAYOUT)),
                *("--port-offset", str(free_port_offset()), "--data-dir", str(data_dir)),
            ],
            stdout=subprocess.PIPE,
            stderr=self.log.open("wb"),
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until ready or the command ends
        ready = READY.search(line)
        assert ready, f"no ready line: {line!r}\n{self.log.read_text()}"
        self.namesrv = ready.group(1)
        found = MEMBER.findall(ready.group(2))
        # (broker name, id) -> (address, role), and -> pid
        self.members = {(name, int(id_)): (address, role) for name, id_, address, role, _ in found}
        self.pids = {(name, int(id_)): int(pid) for name, id_, _, _, pid in found}

    def stop(self) -> tuple[int, str, str]:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=60)
        return self.process.returncode, out, self.log.read_text()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = ClusterUp(tmp_path_factory.mktemp("up") / "data")
    yield running
    if running.process.poll() is None:  # its brokers stop with it (a clean stop)
        try:
            running.stop()
        except subprocess.TimeoutExpired:  # the brokers then see it gone and stop
            running.process.kill()
            running.process.wait()


def test_a_killed_cluster_up_takes_its_brokers_with_it(tmp_path):
    """``rocketmq cluster up`` killed by SIGKILL (no chance to stop its brokers): each
    broker sees its parent gone and stops cleanly instead of running on orphaned."""
    running = ClusterUp(tmp_path / "data")
    brokers = list(running.pids.values())
    running.process.kill()
    running.process.wait()
    deadline = time.monotonic() + 30
    try:
        while any(_running(pid) for pid in brokers):
            assert time.monotonic() < deadline, f"orphaned brokers: {brokers}"
            time.sleep(0.1)
    finally:  # failed: no orphan outlives the test
        for pid in filter(_running, brokers):
            os.kill(pid, signal.SIGKILL)
    assert running.log.read_text().count("rocketmq.broker: broker broker-") == 4


def _running(pid: int) -> bool:
    """``pid`` exists and is not a zombie (an orphan's zombie is init's to reap)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_it_starts_every_broker_of_the_folder_with_its_role(cluster):
    assert cluster.members == {
        ("broker-a", 0): (cluster.members["broker-a", 0][0], "ASYNC_MASTER"),
        ("broker-a", 1): (cluster.members["broker-a", 1][0], "SLAVE"),
        ("broker-b", 0): (cluster.members["broker-b", 0][0], "ASYNC_MASTER"),
        ("broker-b", 1): (cluster.members["broker-b", 1][0], "SLAVE"),
    }
    ports = sorted(int(address.rsplit(":", 1)[1]) for address, _role in cluster.members.values())
    offset = int(cluster.namesrv.rsplit(":", 1)[1]) - 9876
    assert ports == [port + offset for port in LISTEN_PORTS]


def test_a_message_sent_to_a_master_is_read_back_from_its_slave(cluster):
    with sync.Admin(namesrv_addr=cluster.namesrv) as admin:
        admin.create_topic("UpOrders", 2, cluster="DefaultCluster")
    with sync.Producer("up-producer", cluster.namesrv) as producer:
        sent = producer.send(Message("UpOrders", b"replicated body"))
    slave_address = cluster.members[sent.queue.broker_name, 1][0]
    # the same CommitLog offset, asked of the slave: the id of the slave's copy
    _master_host, offset = decode_offset_msg_id(sent.offset_msg_id)
    host, port = slave_address.rsplit(":", 1)
    at_slave = offset_msg_id(pack_host(host, int(port)), offset)
    with sync.Admin(namesrv_addr=cluster.namesrv) as admin:
        deadline = time.monotonic() + 15
        while True:
            try:
                copy = admin.view_message(at_slave)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
    assert (copy.body, copy.topic, copy.queue_offset) == (
        b"replicated body",
        "UpOrders",
        sent.queue_offset,
    )
    assert copy.offset_msg_id == sent.offset_msg_id  # the master's id, stored as it was


def test_cluster_list_shows_roles_ha_addresses_and_the_slaves_lag(cluster, capsys):
    def listed():
        assert main(["cluster", "list", "-n", cluster.namesrv]) == 0
        rows = [re.split(r"\s{2,}", line.strip()) for line in capsys.readouterr().out.splitlines()]
        return rows[0], {(row[1], row[2]): row for row in rows[1:]}

    deadline = time.monotonic() + 15
    while True:
        header, rows = listed()
        lags = {key: row[header.index("LAG")] for key, row in rows.items()}
        if lags[("broker-a", "1")] == lags[("broker-b", "1")] == "0":
            break  # the slaves caught up (the previous test sent to one master)
        assert time.monotonic() < deadline, f"the slaves did not catch up: {lags}"
        time.sleep(0.2)
    assert header[:8] == [
        *("CLUSTER", "BROKER", "ID", "ADDRESS", "VERSION", "ROLE", "HA ADDRESS", "LAG"),
    ]
    roles = {key: row[5] for key, row in rows.items()}
    assert roles == {
        ("broker-a", "0"): "ASYNC_MASTER",
        ("broker-a", "1"): "SLAVE",
        ("broker-b", "0"): "ASYNC_MASTER",
        ("broker-b", "1"): "SLAVE",
    }
    for name in ("broker-a", "broker-b"):
        master_port = int(cluster.members[name, 0][0].rsplit(":", 1)[1])
        master_ha = f"127.0.0.1:{master_port + 1}"  # listenPort + 1
        assert rows[name, "0"][6] == master_ha  # where its slaves connect
        assert rows[name, "1"][6] == master_ha  # the master its slave follows
        assert lags[name, "0"] == "-"  # a lag is a slave's
    assert main(["cluster", "list", "-n", cluster.namesrv, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    slave_a = cluster.members["broker-a", 1][0]
    master_a = cluster.members["broker-a", 0][0]
    assert document["slaveLag"] == {slave_a: 0, cluster.members["broker-b", 1][0]: 0}
    assert document["runtime"][slave_a]["brokerRole"] == "SLAVE"
    assert document["runtime"][slave_a]["haMasterConnected"] == "true"
    master_info = document["runtime"][master_a]
    assert master_info["haConnectionCount"] == "1"
    assert master_info["slaveFallBehindMuch"] == "0"


def test_a_killed_broker_is_reported_and_sigterm_stops_the_rest_with_exit_0(cluster):
    os.kill(cluster.pids["broker-b", 1], signal.SIGKILL)  # as one tries a failover
    reported = "broker-b-s.conf (broker-b, brokerId 1) was killed by SIGKILL; the others run on"
    deadline = time.monotonic() + 15
    while reported not in cluster.log.read_text():
        assert time.monotonic() < deadline, cluster.log.read_text()
        time.sleep(0.05)
    assert cluster.process.poll() is None
    status, out, err = cluster.stop()
    assert status == 0, err
    assert out.splitlines()[-1] == "rocketmq cluster up: stopped"
    assert "Traceback" not in err
    assert err.count("rocketmq.broker: broker broker-") == 3  # each clean stop, logged


def test_a_bad_broker_conf_is_one_line_and_exit_2(tmp_path, capsys):
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "broker-a.conf").write_text("brokerName=broker-a\nbrokerId=0\nbrokerRole=SLAVE\n")
    assert main(["cluster", "up", str(layout), "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert err.startswith(f"rocketmq cluster: error: {layout / 'broker-a.conf'}: ")
    assert "brokerId" in err


def test_two_brokers_on_one_port_are_refused_before_anything_starts(tmp_path, capsys):
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "broker-a.conf").write_text("brokerName=broker-a\nlistenPort=20911\n")
    (layout / "broker-b.conf").write_text("brokerName=broker-b\nlistenPort=20912\n")
    assert main(["cluster", "up", str(layout), "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert "broker-b.conf: listenPort=20912 needs port 20912, which" in err


def test_a_folder_without_broker_confs_is_refused(tmp_path, capsys):
    assert main(["cluster", "up", str(tmp_path), "--data-dir", str(tmp_path / "data")]) == 2
    assert "no broker*.conf or broker*.properties file" in capsys.readouterr().err
