"""RouteTable semantics (ROUTE.md §5.1), without sockets: times and channels are given."""

from __future__ import annotations

import pytest

from rocketmq_core.namesrv.routes import RouteTable
from rocketmq_core.protocol.bodies import (
    DataVersion,
    TopicConfig,
    TopicConfigWrapper,
    TopicRouteData,
)
from rocketmq_core.protocol.constants import TopicSysFlag

A_MASTER, A_SLAVE, B_MASTER = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def topics(version: int = 1, **queues: int) -> TopicConfigWrapper:
    return TopicConfigWrapper(
        {name: TopicConfig(name, count, count) for name, count in queues.items()},
        DataVersion(version, version),
    )


def register(
    table,
    addr=A_MASTER,
    name="broker-a",
    broker_id=0,
    wrapper=None,
    *,
    cluster="C1",
    channel=None,
    now=0.0,
    **options,
):
    return table.register_broker(
        cluster=cluster,
        broker_addr=addr,
        broker_name=name,
        broker_id=broker_id,
        ha_server_addr=addr.replace("10911", "10912"),
        topics=wrapper,
        channel=channel,
        now=now,
        **options,
    )


def queue_counts(table, topic):
    route = table.route(topic)
    return None if route is None else {q.broker_name: q.write_queue_nums for q in route.queue_datas}


def test_master_registration_publishes_its_topics():
    table = RouteTable()
    register(table, wrapper=topics(T=4, TBW102=8))
    route = table.route("T")
    assert [(q.broker_name, q.read_queue_nums, q.perm) for q in route.queue_datas] == [
        ("broker-a", 4, 6)
    ]
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [
        ("C1", "broker-a", {0: A_MASTER})
    ]
    assert table.route("unknown") is None
    assert sorted(table.topics()) == ["T", "TBW102"]


def test_slave_topics_are_ignored_and_the_slave_learns_its_master():
    table = RouteTable()
    early = register(table, A_SLAVE, broker_id=1, wrapper=topics(S=2))
    assert early.master_addr is None  # no live master yet
    assert table.route("S") is None
    register(table, A_MASTER, wrapper=topics(T=4))
    reply = register(table, A_SLAVE, broker_id=1, wrapper=topics(S=2))
    assert (reply.master_addr, reply.ha_server_addr) == (A_MASTER, "10.0.0.1:10912")
    assert table.route("T").broker_datas[0].broker_addrs == {0: A_MASTER, 1: A_SLAVE}


def test_topics_are_taken_again_only_when_the_data_version_changes():
    table = RouteTable()
    register(table, wrapper=topics(1, T=4))
    register(table, wrapper=topics(1, T=16))  # same version: a refresh, not a change
    assert queue_counts(table, "T") == {"broker-a": 4}
    assert table.data_version_changed(A_MASTER, DataVersion(1, 1)) is False
    assert table.data_version_changed(A_MASTER, DataVersion(2, 2)) is True
    register(table, wrapper=topics(2, T=16))
    assert queue_counts(table, "T") == {"broker-a": 16}


def test_topics_missing_from_a_later_registration_stay_unless_configured():
    table = RouteTable()
    register(table, wrapper=topics(1, T=4, U=4))
    register(table, wrapper=topics(2, T=4))
    assert queue_counts(table, "U") == {"broker-a": 4}

    strict = RouteTable(delete_topic_with_broker_registration=True)
    register(strict, wrapper=topics(1, T=4, U=4))
    register(strict, wrapper=topics(2, T=4))
    assert strict.route("U") is None


def test_a_slave_promoted_on_the_same_address_drops_its_old_id():
    table = RouteTable()
    register(table, A_MASTER, wrapper=topics(T=4))
    register(table, A_SLAVE, broker_id=1)
    table.unregister_broker(cluster="C1", broker_addr=A_MASTER, broker_name="broker-a", broker_id=0)
    register(table, A_SLAVE, broker_id=0, wrapper=topics(T=4))
    assert table.brokers["broker-a"].broker_addrs == {0: A_SLAVE}


def test_last_address_gone_takes_broker_cluster_and_topics_away():
    table = RouteTable()
    register(table, A_MASTER, wrapper=topics(T=4, SHARED=2))
    register(table, B_MASTER, "broker-b", wrapper=topics(SHARED=2))
    table.unregister_broker(cluster="C1", broker_addr=A_MASTER, broker_name="broker-a", broker_id=0)
    assert table.route("T") is None
    assert queue_counts(table, "SHARED") == {"broker-b": 2}
    assert "broker-a" not in table.brokers
    assert list(table.clusters["C1"]) == ["broker-b"]
    table.unregister_broker(cluster="C1", broker_addr=B_MASTER, broker_name="broker-b", broker_id=0)
    assert table.clusters == {} and table.topics() == []


def test_unregister_of_a_stale_address_keeps_the_current_member():
    table = RouteTable()
    register(table, A_MASTER, wrapper=topics(T=4))
    table.unregister_broker(cluster="C1", broker_addr=A_SLAVE, broker_name="broker-a", broker_id=0)
    assert queue_counts(table, "T") == {"broker-a": 4}


def test_closed_channel_removes_only_its_brokers():
    table = RouteTable()
    conn_a, conn_b = object(), object()
    register(table, A_MASTER, wrapper=topics(T=4), channel=conn_a)
    register(table, B_MASTER, "broker-b", wrapper=topics(T=4), channel=conn_b)
    assert table.remove_channel(conn_a) == [A_MASTER]
    assert queue_counts(table, "T") == {"broker-b": 4}
    assert table.remove_channel(object()) == []


def test_silent_brokers_expire_and_refreshed_ones_stay():
    table = RouteTable(broker_channel_expired_time=1000)
    register(table, A_MASTER, wrapper=topics(T=4), channel="ca", now=0)
    register(table, B_MASTER, "broker-b", wrapper=topics(U=4), channel="cb", now=0)
    register(table, "10.0.0.4:1", "broker-c", wrapper=topics(V=1), now=0, timeout=5000)
    assert table.refresh(B_MASTER, 900) is True
    assert table.refresh("10.9.9.9:1", 900) is False
    assert table.expire(1000) == []  # exactly at the limit: still alive
    assert table.expire(1001) == [(A_MASTER, "ca")]
    assert table.route("T") is None and table.route("U") is not None
    assert table.expire(1901) == [(B_MASTER, "cb")]
    assert table.route("V") is not None  # its own 5 s heartbeat timeout


def test_delete_topic_everywhere_or_in_one_cluster():
    table = RouteTable()
    register(table, A_MASTER, wrapper=topics(T=4), cluster="C1")
    register(table, B_MASTER, "broker-b", wrapper=topics(T=4), cluster="C2")
    table.delete_topic("T", "C1")
    assert queue_counts(table, "T") == {"broker-b": 4}
    table.delete_topic("T", "no-such-cluster")
    assert queue_counts(table, "T") == {"broker-b": 4}
    table.delete_topic("T")
    assert table.route("T") is None


def test_write_permission_is_wiped_and_added_back():
    table = RouteTable()
    register(table, wrapper=topics(T=4, U=4))
    assert table.change_write_perm("broker-a", writable=False) == 2
    assert {q.perm for q in table.route("T").queue_datas} == {4}
    assert table.change_write_perm("broker-a", writable=True) == 2
    assert {q.perm for q in table.route("T").queue_datas} == {6}
    assert table.change_write_perm("broker-x", writable=True) == 0


def test_listings():
    table = RouteTable()
    wrapper = topics(T=4, UNIT=1, SUB=1, BOTH=1)
    wrapper.topic_configs["UNIT"].topic_sys_flag = TopicSysFlag.UNIT
    wrapper.topic_configs["SUB"].topic_sys_flag = TopicSysFlag.UNIT_SUB
    wrapper.topic_configs["BOTH"].topic_sys_flag = TopicSysFlag.UNIT | TopicSysFlag.UNIT_SUB
    register(table, wrapper=wrapper, cluster="C1")
    register(table, B_MASTER, "broker-b", wrapper=topics(X=1), cluster="C2")
    assert table.unit_topics(unit=True, unit_sub=None) == ["UNIT", "BOTH"]
    assert table.unit_topics(unit=None, unit_sub=True) == ["SUB", "BOTH"]
    assert table.unit_topics(unit=False, unit_sub=True) == ["SUB"]
    assert table.topics_of_cluster("C2") == ["X"]
    assert table.system_topics() == (["C1", "broker-a", "C2", "broker-b"], A_MASTER)
    info = table.cluster_info()
    assert info.cluster_addr_table == {"C1": ["broker-a"], "C2": ["broker-b"]}
    assert info.broker_addr_table["broker-b"].broker_addrs == {0: B_MASTER}


def test_route_bodies_are_cached_until_the_table_changes():
    table = RouteTable()
    register(table, wrapper=topics(1, T=4))
    first = table.route_body("T", standard=True)
    assert table.route_body("T", standard=True) is first
    register(table, wrapper=topics(1, T=4), now=30_000)  # the periodic re-registration
    assert table.route_body("T", standard=True) is first
    assert TopicRouteData.decode(first).queue_datas[0].write_queue_nums == 4
    register(table, wrapper=topics(2, T=8))
    assert (
        TopicRouteData.decode(table.route_body("T", standard=True)).queue_datas[0].write_queue_nums
        == 8
    )
    assert table.route_body("nope", standard=False) is None


def test_routes_returned_are_copies():
    table = RouteTable()
    register(table, wrapper=topics(T=4))
    route = table.route("T")
    route.broker_datas[0].broker_addrs[0] = "tampered"
    route.queue_datas[0].perm = 0
    assert table.route("T").broker_datas[0].broker_addrs == {0: A_MASTER}
    assert table.route("T").queue_datas[0].perm == 6


@pytest.mark.parametrize("zone", ["zone-1"])
def test_zone_name_and_filter_servers_are_in_the_route(zone):
    table = RouteTable()
    register(table, wrapper=topics(T=1), zone_name=zone, filter_server_list=["10.0.0.1:30000"])
    route = table.route("T")
    assert route.broker_datas[0].zone_name == zone
    assert route.filter_server_table == {A_MASTER: ["10.0.0.1:30000"]}
    register(table, wrapper=topics(T=1))
    assert table.route("T").filter_server_table == {}
