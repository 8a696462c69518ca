"""``rocketmq broker-config``: read and change a running broker's settings."""

from __future__ import annotations

import argparse

from ..client.admin import Admin
from .base import AdminCommand, Output


class BrokerConfigCommand(AdminCommand):
    help = "show or change the settings of a running broker (or of every broker of a cluster)"
    actions = {
        "get": "the broker's effective settings, key = value, sorted",
        "update": "change one setting of the running broker(s); the broker refuses an"
        " unknown key, a bad value, or a key it reads at startup only",
    }

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("-b", "--broker", metavar="ADDR", help="the broker (host:port)")
        where.add_argument(
            "-c", "--cluster", help="every broker, master and slave, of this cluster"
        )
        if action == "update":
            parser.add_argument("-k", "--key", required=True, type=_one_line, help="the setting")
            parser.add_argument(
                "-v", "--value", required=True, type=_one_line, help="its new value"
            )

    async def do_get(self, admin: Admin, args: argparse.Namespace) -> Output:
        configs, sections = {}, []
        for name, address in await admin.broker_members(args.cluster, args.broker):
            config = configs[address] = await admin.broker_config(address)
            lines = [f"{key} = {value}".rstrip() for key, value in config.items()]
            if args.cluster is not None:
                lines.insert(0, f"# {name} {address}")
            sections.append("\n".join(lines))
        return Output(configs, "\n\n".join(sections))

    async def do_update(self, admin: Admin, args: argparse.Namespace) -> Output:
        addresses = []
        for _name, address in await admin.broker_members(args.cluster, args.broker):
            await admin.update_broker_config(address, {args.key: args.value})
            addresses.append(address)
        document = {"key": args.key, "value": args.value, "brokers": addresses}
        return Output(document, f"updated {args.key}={args.value} on {', '.join(addresses)}")


def _one_line(text: str) -> str:
    if not text.strip() or "\n" in text or "\r" in text:
        raise argparse.ArgumentTypeError(f"{text!r}: give one line, not empty")
    return text
