"""The built-in admin commands of ``rocketmq`` (consume, topic, cluster, group, message,
offset, send); they live in ``rocketmq_core/admin_cli/`` and are imported when registered."""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def rocketmq_register_cli_commands(register):
    from ..admin_cli import cluster, consume, group, message, offset, send, topic

    register("consume", consume.ConsumeCommand())
    register("topic", topic.TopicCommand())
    register("cluster", cluster.ClusterCommand())
    register("group", group.GroupCommand())
    register("message", message.MessageCommand())
    register("offset", offset.OffsetCommand())
    register("send", send.SendCommand())
