"""What the admin commands of ``rocketmq`` share: options, running an action, output.

Each action takes ``-n/--namesrv`` (else NAMESRV_ADDR, else 127.0.0.1:9876) and
``--json``; it prints an aligned table, or one JSON document with ``--json``. A failure
prints one line to stderr saying what failed where, and exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..client.admin import Admin
from ..client.config import ClientConfig
from ..client.instance import ClientInstance
from ..client.producer import MQClientError
from ..client.render import to_json
from ..errors import RocketMQError, found_in
from ..plugins import PluginHost
from ..runtime import run

DEFAULT_NAMESRV = "127.0.0.1:9876"


class CommandError(Exception):
    """Input a command cannot use (a timestamp it cannot read, ...)."""


@dataclass
class Output:
    document: Any  # what --json writes
    text: str  # what a person reads


Action = Callable[[Admin, argparse.Namespace], Awaitable[Output]]


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n",
        "--namesrv",
        metavar="ADDR",
        help=f"name servers, 'host:port;host:port' (default: NAMESRV_ADDR, else {DEFAULT_NAMESRV})",
    )
    parser.add_argument("--json", action="store_true", help="one JSON document on stdout")


def add_topic_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--topic", required=True, help="the topic")


def add_target_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "-c", "--cluster", help="every master of this cluster (default: the only one)"
    )
    where.add_argument("-b", "--broker", metavar="ADDR", help="only this broker (host:port)")


class AdminCommand:
    """A command with actions (``rocketmq topic create``): subclasses list them and
    implement each as ``do_<action>(admin, args) -> Output``."""

    help = ""
    actions: dict[str, str] = {}  # action -> help

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", metavar="ACTION")
        for action, text in self.actions.items():
            sub = actions.add_parser(action, help=text, description=text)
            self.add_action_arguments(action, sub)
            add_common_options(sub)

    def add_action_arguments(self, action: str, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        if getattr(args, "action", None) not in self.actions:
            choices = "|".join(self.actions)
            print(f"usage: rocketmq {args.command} {{{choices}}} [options]", file=sys.stderr)
            return 2
        return run_action(args, host, getattr(self, "do_" + args.action))


def run_action(args: argparse.Namespace, host: PluginHost, action: Action) -> int:
    """Run ``action`` with an Admin on the chosen name servers; print its output."""
    name = " ".join(filter(None, ["rocketmq", args.command, getattr(args, "action", None)]))
    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV

    async def main() -> Output:
        instance = ClientInstance(ClientConfig(namesrv_addr=namesrv), host=host)
        async with Admin(instance=instance) as admin:
            return await action(admin, args)

    try:
        output = run(main)
    except (RocketMQError, MQClientError, CommandError, BaseExceptionGroup) as exc:
        found = found_in(exc, (RocketMQError, MQClientError, CommandError))
        if found is None:
            raise
        print(f"{name}: error: {found}", file=sys.stderr)
        return 1
    sys.stdout.write(to_json(output.document) if args.json else output.text.rstrip() + "\n")
    return 0
