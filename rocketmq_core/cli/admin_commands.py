"""The built-in admin commands of ``rocketmq`` (consume, topic, cluster, group, message,
offset, send, broker-config, kv, acl); each lives in its own module of this package and is
imported when registered."""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def rocketmq_register_cli_commands(register):
    from . import acl, broker_config, cluster, consume, group, kv, message, offset, send, topic

    register("consume", consume.ConsumeCommand())
    register("topic", topic.TopicCommand())
    register("cluster", cluster.ClusterCommand())
    register("group", group.GroupCommand())
    register("message", message.MessageCommand())
    register("offset", offset.OffsetCommand())
    register("send", send.SendCommand())
    register("broker-config", broker_config.BrokerConfigCommand())
    register("kv", kv.KvCommand())
    register("acl", acl.AclCommand())
