"""The ``rocketmq`` command line: sub-commands come from plugins, built-ins included."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import ConfigError, PluginError, found_in
from ..plugins import DISABLE_ENV, PluginHost, load_plugins


def build_parser(host: PluginHost, only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of the command ``only`` alone: each command made
    costs its module's imports, and a run needs the parser of one (its errors and help
    read the same either way; the list of commands is in the top-level help only)."""
    parser = argparse.ArgumentParser(
        prog="rocketmq",
        description="A RocketMQ-compatible name server and broker, built from plugins.",
    )
    parser.add_argument(
        "--version", action="store_true", help="show the version of the core and every plugin"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    registered = host.registry.cli_commands
    names = registered.names() if only is None else [only]
    for name in names:
        if not offered(host, name):
            continue
        command = registered.get(name)
        sub = commands.add_parser(name, help=command.help, description=command.help)
        command.add_arguments(sub)
        host.hook.rocketmq_add_options(command=name, parser=sub)
    return parser


def version_text(host: PluginHost) -> str:
    lines = [f"rocketmq-core {__version__}"]
    for plugin in host.plugins:
        if plugin.source == "builtin":
            continue
        origin = f"{plugin.distribution or '(no distribution)'} {plugin.version or ''}".rstrip()
        suffix = "" if plugin.status == "loaded" else f" [{plugin.status}]"
        lines.append(f"  plugin {plugin.name}: {origin}{suffix}")
    return "\n".join(lines)


def requested_command(argv: list[str]) -> str | None:
    """The command word of ``argv``: its first word that is no option (the options before
    it, ``-h`` and ``--version``, take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def offered(host: PluginHost, command: str) -> bool:
    """``command`` is registered, by a plugin that did not fail (it may fail when its
    deferred command is made: see PluginHost.load_commands)."""
    if command not in host.registry.cli_commands:
        return False
    plugin = host.command_plugin(command)
    return plugin is None or plugin.status == "loaded"


def why_unavailable(host: PluginHost, command: str) -> str | None:
    """Why ``command`` is missing, when a plugin that failed or is blocked is the cause;
    None when the command is there, or when no such plugin explains its absence."""
    if offered(host, command):
        return None
    for plugin in host.plugins:
        if plugin.commands is None or command not in plugin.commands:
            continue
        if plugin.status == "failed":
            return (
                f"command {command!r} is unavailable:"
                f" plugin {plugin.name} failed to load: {plugin.error}"
            )
        if plugin.status == "blocked":
            return (
                f"command {command!r} is unavailable:"
                f" plugin {plugin.name} is blocked by {DISABLE_ENV}"
            )
    # a plugin that failed before registering anything may have been the command's
    suspects = [
        f"plugin {plugin.name}: {plugin.error}"
        for plugin in host.plugins
        if plugin.status == "failed" and plugin.commands is None
    ]
    if not suspects:
        return None
    return (
        f"unknown command {command!r}; it may belong to a plugin that failed to load: "
        + "; ".join(suspects)
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    host = load_plugins()
    requested = requested_command(argv)
    # the command word first: what follows is that command's (top-level -h and --version
    # come before it), so its parser alone reads argv as the whole one would
    first_is_command = bool(argv) and argv[0] == requested
    only = requested if first_is_command and requested in host.registry.cli_commands else None
    host.load_commands(None if only is None else [only])
    reason = why_unavailable(host, requested) if requested is not None else None
    if reason is not None:
        print(f"rocketmq: {reason}", file=sys.stderr)
        return 2
    parser = build_parser(host, only)
    args = parser.parse_args(argv)
    if args.version:
        print(version_text(host))
        return 0
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    command = host.registry.cli_commands.get(args.command)
    try:
        return command.run(args, host) or 0
    except (ConfigError, PluginError, BaseExceptionGroup) as exc:
        actionable = found_in(exc, (ConfigError, PluginError))
        if actionable is None:
            raise
        print(f"rocketmq {args.command}: error: {actionable}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
