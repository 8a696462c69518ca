"""The built-in ``rocketmq plugins`` command: what is installed and what it provides."""

from __future__ import annotations

import argparse
import sys

import orjson

from ..hookspecs import hookimpl
from ..plugins import PluginHost, PluginInfo


class PluginsCommand:
    help = "list installed plugins, their versions, hooks and registered names"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="plugins_action", metavar="ACTION")
        listing = actions.add_parser("list", help=self.help)
        listing.add_argument("--json", action="store_true", help="one JSON document on stdout")

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        if args.plugins_action != "list":
            print("usage: rocketmq plugins list [--json]", file=sys.stderr)
            return 2
        host.load_commands()  # a command whose module cannot load fails its plugin here
        if args.json:
            document = [plugin.as_dict() for plugin in host.plugins]
            sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            sys.stdout.write("".join(_describe(plugin) for plugin in host.plugins))
        failed = [plugin.name for plugin in host.plugins if plugin.status == "failed"]
        if failed:
            # a broken install must fail the command that checks it (the README's first one)
            print(
                f"rocketmq plugins: {len(failed)} plugin(s) failed to load: {', '.join(failed)}",
                file=sys.stderr,
            )
            return 1
        return 0


def _describe(plugin: PluginInfo) -> str:
    origin = f"{plugin.distribution or '(no distribution)'} {plugin.version or ''}".rstrip()
    lines = [f"{plugin.name}  [{plugin.status}]  {origin}, {plugin.source} {plugin.module}"]
    if plugin.error:
        lines.append(f"    error: {plugin.error}")
    if plugin.hooks:
        lines.append(f"    hooks: {', '.join(plugin.hooks)}")
    for kind, names in plugin.registered.items():
        lines.append(f"    {kind}: {', '.join(names)}")
    return "\n".join(lines) + "\n"


@hookimpl
def rocketmq_register_cli_commands(register):
    register("plugins", PluginsCommand())
