"""``rocketmq cluster``: clusters, their brokers, each broker's version and load."""

from __future__ import annotations

import argparse

from ..client.admin import Admin
from ..client.render import table
from ..errors import RocketMQError
from .base import AdminCommand, Output


class ClusterCommand(AdminCommand):
    help = "show clusters, their brokers and each broker's version and load"
    actions = {"list": "list clusters and brokers with runtime info"}

    async def do_list(self, admin: Admin, args: argparse.Namespace) -> Output:
        summary = await admin.cluster_info()
        rows, runtime = [], {}
        for cluster, names in summary.clusters.items():
            for name in names:
                broker = summary.brokers.get(name)
                for broker_id, address in sorted((broker.addresses if broker else {}).items()):
                    try:
                        info = await admin.broker_runtime_info(address)
                    except RocketMQError as exc:
                        info = {"error": str(exc)}
                    runtime[address] = info
                    rows.append(
                        [
                            cluster,
                            name,
                            broker_id,
                            address,
                            info.get("brokerVersionDesc", "-"),
                            info.get("msgPutTotalTodayNow", "-"),
                            info.get("runtime", "unreachable"),
                        ]
                    )
        headers = ["CLUSTER", "BROKER", "ID", "ADDRESS", "VERSION", "PUT TODAY", "UPTIME"]
        document = {"clusters": summary.clusters, "brokers": summary.brokers, "runtime": runtime}
        return Output(document, table(headers, rows))
