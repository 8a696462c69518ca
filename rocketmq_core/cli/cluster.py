"""``rocketmq cluster``: clusters, their brokers, each broker's version and load, its
runtime info (status), and the traffic of every topic and consumer group (stats)."""

from __future__ import annotations

import argparse

from ..client.admin import Admin
from ..errors import RocketMQError
from ..plugins import PluginHost
from .base import AdminCommand, Output, add_common_options, add_target_options
from .cluster_up import add_up_arguments, run_up
from .render import table

STATS_HELP = (
    "per topic and consumer group, as mqadmin statsAll: the accumulation (lag), messages"
    " put (in) and pulled by the group (out) a second over the last minute, and in the"
    " last 24 hours, as the topic's masters count them (they sample every 10 s, so a"
    " new topic shows 0 for a few seconds); NO_CONSUMER when no group consumes a topic"
)

UP_HELP = (
    "start a local cluster from a folder of broker*.conf files (examples/conf/2m-2s-async):"
    " a name server and every broker, until Ctrl-C"
)
LIST_HELP = (
    "list clusters and brokers: version, role (ASYNC_MASTER, SYNC_MASTER, SLAVE), HA"
    " address (a master's, where its slaves connect; a slave's master's), a slave's LAG"
    " (bytes of CommitLog its master has and it has not), IN and OUT TPS (messages put and"
    " pulled a second, over the last 10 s, as mqadmin clusterList), messages put today, uptime"
)


def first_tps(rates: str | None) -> str:
    """The first (10 s) part of a runtime-info rate triple (``putTps``), as mqadmin
    clusterList prints it; 0 while the broker has too few samples, "-" when unknown."""
    if rates is None:
        return "-"
    parts = rates.split()
    try:
        return f"{float(parts[0]) if parts else 0.0:.2f}"
    except ValueError:
        return "-"


def slave_lag(
    members: list[tuple[str, str, int, str]], runtime: dict[str, dict[str, str]]
) -> dict[str, int]:
    """Each reachable slave's lag in bytes: its master's CommitLog end minus its own
    (members: cluster, broker name, broker id, address); slaves without a master left out."""
    ends = {}
    for _cluster, name, broker_id, address in members:
        end = runtime[address].get("commitLogMaxOffset")
        if end is not None:
            ends[name, broker_id] = int(end)
    lag = {}
    for _cluster, name, broker_id, address in members:
        master_end = ends.get((name, 0))
        if broker_id != 0 and master_end is not None and (name, broker_id) in ends:
            lag[address] = max(0, master_end - ends[name, broker_id])
    return lag


class ClusterCommand(AdminCommand):
    help = "show clusters, their brokers, each broker's runtime info, and traffic stats"
    actions = {
        "list": LIST_HELP,
        "status": "a broker's runtime info (every member of a cluster with -c), key and value",
        "stats": STATS_HELP,
        "up": UP_HELP,
    }

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        for action, text in self.actions.items():
            sub = actions.add_parser(action, help=text, description=text)
            self.add_action_arguments(action, sub)
            if action != "up":  # it starts the name server the others ask
                add_common_options(sub)

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        if getattr(args, "action", None) == "up":
            return run_up(args, host)
        return super().run(args, host)

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        if action == "up":
            add_up_arguments(parser)
        if action == "status":
            add_target_options(parser)
        if action == "stats":
            parser.add_argument("-t", "--topic", help="only this topic")
            parser.add_argument(
                "-a",
                "--active",
                action="store_true",
                help="only rows with messages put or pulled in the last 24 hours",
            )

    async def do_list(self, admin: Admin, args: argparse.Namespace) -> Output:
        summary = await admin.cluster_info()
        members, runtime = [], {}
        for cluster, names in summary.clusters.items():
            for name in names:
                broker = summary.brokers.get(name)
                for broker_id, address in sorted((broker.addresses if broker else {}).items()):
                    try:
                        info = await admin.broker_runtime_info(address)
                    except RocketMQError as exc:
                        info = {"error": str(exc)}
                    runtime[address] = info
                    members.append((cluster, name, broker_id, address))
        lag = slave_lag(members, runtime)
        rows = []
        for cluster, name, broker_id, address in members:
            info = runtime[address]
            rows.append(
                [
                    cluster,
                    name,
                    broker_id,
                    address,
                    info.get("brokerVersionDesc", "-"),
                    info.get("brokerRole", "-"),
                    info.get("haServerAddr") or info.get("haMasterAddress") or "-",
                    lag.get(address),
                    first_tps(info.get("putTps")),
                    first_tps(info.get("getTransferedTps") or info.get("getTransferredTps")),
                    info.get("msgPutTotalTodayNow", "-"),
                    info.get("runtime", "unreachable"),
                ]
            )
        headers = [
            *("CLUSTER", "BROKER", "ID", "ADDRESS", "VERSION", "ROLE", "HA ADDRESS", "LAG"),
            *("IN TPS", "OUT TPS", "PUT TODAY", "UPTIME"),
        ]
        document = {
            "clusters": summary.clusters,
            "brokers": summary.brokers,
            "runtime": runtime,
            "slaveLag": lag,
        }
        return Output(document, table(headers, rows))

    async def do_status(self, admin: Admin, args: argparse.Namespace) -> Output:
        runtime = {}
        for _name, address in await admin.broker_members(args.cluster, args.broker):
            runtime[address] = dict(sorted((await admin.broker_runtime_info(address)).items()))
        if args.broker is not None:
            rows = [[key, value] for key, value in runtime[args.broker].items()]
            return Output(runtime, table(["KEY", "VALUE"], rows))
        rows = [
            [address, key, value]
            for address, info in runtime.items()
            for key, value in info.items()
        ]
        return Output(runtime, table(["ADDRESS", "KEY", "VALUE"], rows))

    async def do_stats(self, admin: Admin, args: argparse.Namespace) -> Output:
        rows = await admin.stats_all(args.topic)
        if args.active:
            rows = [row for row in rows if row.active]
        headers = [
            *("TOPIC", "CONSUMER GROUP", "ACCUMULATION", "IN TPS", "OUT TPS"),
            *("IN MSG 24H", "OUT MSG 24H"),
        ]
        cells = [
            [
                *(r.topic, r.group, r.accumulation, r.in_tps, r.out_tps, r.in_msg_24h),
                "NO_CONSUMER" if r.group is None else r.out_msg_24h,  # mqadmin's marker
            ]
            for r in rows
        ]
        return Output(rows, table(headers, cells))
