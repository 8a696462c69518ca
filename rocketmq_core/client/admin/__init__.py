"""Admin: what ``mqadmin`` does, as an async API (topics, clusters, groups, messages,
offsets, name-server KV config, ACL accounts).

async with Admin(namesrv_addr="127.0.0.1:9876") as admin:
    await admin.create_topic("Orders", 8, cluster="DefaultCluster")
    stats = await admin.consume_stats("CG-orders", "Orders")

Results are the dataclasses of ``admin_types``; a failure raises AdminError naming the
call, the broker or name server, and the answer (or silence) that made it fail.

One module per request family, each a mixin over ``base.AdminBase`` (the instance, the
request helpers, the broker lookups); Admin is their sum.
"""

from __future__ import annotations

from ..admin_types import AdminError, TopicExistsError
from .acl import AclAdmin
from .brokers import BrokerAdmin
from .connections import ConnectionAdmin
from .consume_directly import ConsumeDirectlyAdmin
from .groups import GroupAdmin
from .kv import KVConfigAdmin
from .messages import TOOLS_GROUP, MessageAdmin
from .offsets import LATEST, OffsetAdmin
from .stats import StatsAdmin
from .topics import TopicAdmin

__all__ = ["LATEST", "TOOLS_GROUP", "Admin", "AdminError", "TopicExistsError"]


class Admin(
    ConsumeDirectlyAdmin,
    StatsAdmin,
    TopicAdmin,
    KVConfigAdmin,
    GroupAdmin,
    ConnectionAdmin,
    MessageAdmin,
    OffsetAdmin,
    BrokerAdmin,
    AclAdmin,
):
    """An async context manager owning (or sharing) one ClientInstance."""
