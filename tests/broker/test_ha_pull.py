"""Pulls in a master/slave group: the broker's suggestWhichBrokerId and what a slave does
with a pull's commit offset and an offset it does not hold (HA.md §6)."""

from __future__ import annotations

import pytest

from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.headers import PullMessageRequestHeader

from .test_ha import TOPIC, master_config, send, serving, slave_config, until
from .wire import pull_request, send_request

pytestmark = pytest.mark.anyio

COMMIT_AND_SUBSCRIPTION = 0x1 | 0x4


def committing_pull(offset: int, commit_offset: int) -> RemotingCommand:
    header = PullMessageRequestHeader(
        consumer_group="CG",
        topic="Orders",
        queue_id=0,
        queue_offset=offset,
        max_msg_nums=32,
        sys_flag=COMMIT_AND_SUBSCRIPTION,
        commit_offset=commit_offset,
        suspend_timeout_millis=0,
        sub_version=0,
        subscription="*",
    )
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext_fields())


@pytest.mark.parametrize(
    ("slave_read_enable", "memory", "suggested"),
    [
        (True, 1000, "1"),  # 40% of 1000 bytes: 8 records of ~250 bytes are too many
        (True, 1 << 40, "0"),  # everything fits in memory: stay on the master
        (False, 1000, "0"),  # reading from slaves is off
    ],
)
async def test_the_master_suggests_the_slave_when_the_reader_is_beyond_memory(
    tmp_path, namesrv, client, plugin_host, slave_read_enable, memory, suggested
):
    config = master_config(
        tmp_path, namesrv, slave_read_enable=slave_read_enable, total_physical_memory=memory
    )
    async with serving(config, plugin_host) as master:
        master.topics.update(TOPIC)
        for n in range(40):
            await send(client, master, b"x" * 100 + str(n).encode())
        # a pull reads 32 of the 40: the last one read is 8 records behind the end
        first = await client.invoke(master.address, pull_request(offset=0), timeout=10)
        last = await client.invoke(master.address, pull_request(offset=39), timeout=10)
    assert first.code == ResponseCode.SUCCESS, first.remark
    assert first.ext_fields["suggestWhichBrokerId"] == suggested
    # the newest record is at the CommitLog end: never too far behind
    assert last.ext_fields["suggestWhichBrokerId"] == "0"


@pytest.mark.parametrize(("memory", "suggested"), [(1000, "1"), (1 << 40, "0")])
async def test_a_pull_whose_records_are_all_filtered_out_still_suggests_by_how_far_behind(
    tmp_path, namesrv, client, plugin_host, memory, suggested
):
    config = master_config(tmp_path, namesrv, slave_read_enable=True, total_physical_memory=memory)
    async with serving(config, plugin_host) as master:
        master.topics.update(TOPIC)
        master.topics.update(TopicConfig("Other", 1, 1))
        for n in range(10):
            await send(client, master, f"m{n}".encode(), tags="TagA")
        # ~2.5 KB written after the Orders queue's last entry: 40% of 1000 bytes is far less
        for _ in range(10):
            await client.invoke(master.address, send_request("Other", b"y" * 100), timeout=10)
        unmatched = pull_request(offset=0, subscription="TagB", suspend=0)
        filtered = await client.invoke(master.address, unmatched, timeout=10)
        at_the_end = pull_request("Other", offset=0, subscription="TagB", suspend=0)
        newest = await client.invoke(master.address, at_the_end, timeout=10)
    assert filtered.code == ResponseCode.PULL_RETRY_IMMEDIATELY, filtered.remark
    assert filtered.ext_fields["nextBeginOffset"] == "10"
    # every entry looked at, though none returned, is that far behind the CommitLog end
    assert filtered.ext_fields["suggestWhichBrokerId"] == suggested
    # a filtered read up to the newest record is never too far behind
    assert newest.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert newest.ext_fields["suggestWhichBrokerId"] == "0"


async def test_a_slave_ignores_commit_offsets_and_retries_an_offset_it_lacks(
    tmp_path, namesrv, client, plugin_host
):
    async with (
        serving(master_config(tmp_path, namesrv), plugin_host) as master,
        serving(slave_config(tmp_path, namesrv), plugin_host) as slave,
    ):
        master.topics.update(TOPIC)
        slave.topics.update(TOPIC)
        for n in range(3):
            await send(client, master, f"m{n}".encode())
        await until(lambda: slave.store.max_offset("Orders", 0) == 3)
        on_slave = await client.invoke(slave.address, committing_pull(0, 2), timeout=10)
        on_master = await client.invoke(master.address, committing_pull(0, 2), timeout=10)
        beyond_slave = await client.invoke(slave.address, pull_request(offset=100), timeout=10)
        beyond_master = await client.invoke(master.address, pull_request(offset=100), timeout=10)
        slave_offset = slave.offsets.query("CG", "Orders", 0)
        master_offset = master.offsets.query("CG", "Orders", 0)
    assert on_slave.code == on_master.code == ResponseCode.SUCCESS
    assert (slave_offset, master_offset) == (-1, 2)
    # the slave may only be behind its master: retry there, from the same offset
    assert beyond_slave.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert beyond_slave.ext_fields["nextBeginOffset"] == "100"
    assert beyond_slave.ext_fields["suggestWhichBrokerId"] == "0"
    assert beyond_master.code == ResponseCode.PULL_OFFSET_MOVED
    assert beyond_master.ext_fields["nextBeginOffset"] == "3"
