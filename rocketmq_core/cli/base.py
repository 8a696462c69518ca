"""What the admin commands of ``rocketmq`` share: options, running an action, output.

Each action takes ``-n/--namesrv`` (else NAMESRV_ADDR, else 127.0.0.1:9876), ``--tls-ca``
(the CA that QUIC name servers and brokers are verified with), ``--access-key`` and
``--secret-key`` (else ROCKETMQ_ACCESS_KEY and ROCKETMQ_SECRET_KEY, else mqadmin's
``$ROCKETMQ_HOME/conf/tools.yml``: every request is then signed for ACL) and ``--json``;
it prints an aligned table, or one JSON document with ``--json``. A failure prints one
line to stderr saying what failed where, and exits 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..acl.home import acl_home
from ..acl.signing import Credentials
from ..client.admin import Admin
from ..client.config import TRUST_CERT_PATH_VARIABLE, ClientConfig
from ..client.instance import ClientInstance
from ..client.producer import MQClientError
from ..errors import ConfigError, RocketMQError, found_in
from ..plugins import PluginHost
from ..remoting.transport import TlsOptions
from ..runtime import run
from .render import to_json

DEFAULT_NAMESRV = "127.0.0.1:9876"
ACCESS_KEY_VARIABLE = "ROCKETMQ_ACCESS_KEY"
SECRET_KEY_VARIABLE = "ROCKETMQ_SECRET_KEY"
# mqadmin's credentials under ROCKETMQ_HOME (Apache's MixAll.ACL_CONF_TOOLS_FILE)
TOOLS_CREDENTIALS_FILE = Path("conf") / "tools.yml"


class CommandError(RocketMQError):
    """Input a command cannot use (a timestamp it cannot read, ...)."""


@dataclass
class Output:
    document: Any  # what --json writes
    text: str  # what a person reads
    status: int = 0  # the exit status (a command stopped by a signal: 130 or 143)
    streamed: bool = False  # records went to stdout as they came; the text is for stderr


Action = Callable[[Admin, argparse.Namespace], Awaitable[Output]]


def add_common_options(
    parser: argparse.ArgumentParser, json_help: str = "one JSON document on stdout"
) -> None:
    parser.add_argument(
        "-n",
        "--namesrv",
        metavar="ADDR",
        help=f"name servers, 'host:port;host:port' (default: NAMESRV_ADDR, else {DEFAULT_NAMESRV})",
    )
    parser.add_argument(
        "--tls-ca",
        metavar="FILE",
        help="CA file (PEM) to verify quic:// name servers and brokers with, and TCP"
        " ones with --tls (default: ROCKETMQ_TLS_TRUST_CERT_PATH, else the system's CAs)",
    )
    parser.add_argument(
        "--tls",
        action="store_true",
        help="reach name servers and brokers over TLS on TCP (their tls.server.mode is"
        " permissive or enforcing)",
    )
    parser.add_argument(
        "--access-key",
        metavar="KEY",
        help=f"sign every request with this ACL account (default: {ACCESS_KEY_VARIABLE})",
    )
    parser.add_argument(
        "--secret-key",
        metavar="SECRET",
        help=f"the account's secret (default: {SECRET_KEY_VARIABLE}; the environment keeps it"
        " out of the process list)",
    )
    parser.add_argument("--json", action="store_true", help=json_help)


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
    implement each as ``do_<action>(admin, args) -> Output`` (a dash in the action's
    name is an underscore in the method's)."""

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
        return run_action(args, host, getattr(self, "do_" + args.action.replace("-", "_")))


def run_action(args: argparse.Namespace, host: PluginHost, action: Action) -> int:
    """Run ``action`` with an Admin on the chosen name servers; print its output."""
    name = " ".join(filter(None, ["rocketmq", args.command, getattr(args, "action", None)]))
    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV
    config = ClientConfig(
        namesrv_addr=namesrv,
        quic_tls=_quic_tls(getattr(args, "tls_ca", None)),
        tls=_tcp_tls(args),
        credentials=credentials_of(args),
    )

    async def main() -> Output:
        instance = ClientInstance(config, host=host)
        async with Admin(instance=instance) as admin:
            return await action(admin, args)

    try:
        output = run(main)
    except (RocketMQError, MQClientError, BrokenPipeError, BaseExceptionGroup) as exc:
        if found_in(exc, BrokenPipeError) is not None:
            # the reader of stdout went away (`| head`): stop quietly, as cat does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141  # 128 + SIGPIPE
        found = found_in(exc, (RocketMQError, MQClientError))
        if found is None:
            raise
        print(f"{name}: error: {found}", file=sys.stderr)
        return 1
    if output.streamed:
        print(output.text.rstrip(), file=sys.stderr)
    else:
        sys.stdout.write(to_json(output.document) if args.json else output.text.rstrip() + "\n")
    return output.status


def credentials_of(args: argparse.Namespace) -> Credentials | None:
    """``--access-key``/``--secret-key``, each else its environment variable: both or
    neither (ConfigError naming the missing one); with neither, mqadmin's
    ``$ROCKETMQ_HOME/conf/tools.yml`` when it holds both."""
    access_key = getattr(args, "access_key", None) or os.environ.get(ACCESS_KEY_VARIABLE)
    secret_key = getattr(args, "secret_key", None) or os.environ.get(SECRET_KEY_VARIABLE)
    if not access_key and not secret_key:
        return tools_file_credentials()
    if not secret_key:
        raise ConfigError(
            f"an access key is given but no secret key: add --secret-key (or set"
            f" {SECRET_KEY_VARIABLE})"
        )
    if not access_key:
        raise ConfigError(
            f"a secret key is given but no access key: add --access-key (or set"
            f" {ACCESS_KEY_VARIABLE})"
        )
    return Credentials(access_key, secret_key)


def tools_file_credentials() -> Credentials | None:
    """The keys of ``conf/tools.yml`` under ROCKETMQ_HOME (else the user's home, as the
    servers look for their ACL files), which Apache's mqadmin signs with: None when the
    file is absent or leaves a key blank (mqadmin then sends unsigned), a ConfigError
    naming the file when it cannot be read."""
    path = acl_home(os.environ.get("ROCKETMQ_HOME", "")) / TOOLS_CREDENTIALS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the admin credentials {path}: {exc}") from None
    import yaml  # only when the file is there: not on any other command's path

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{path} is not YAML ({exc.__class__.__name__}); write accessKey: and secretKey:"
        ) from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold accessKey: and secretKey:, not {type(data).__name__}")
    access_key, secret_key = _yaml_text(data.get("accessKey")), _yaml_text(data.get("secretKey"))
    if not access_key.strip() or not secret_key.strip():
        return None
    return Credentials(access_key, secret_key)


def _yaml_text(value: object) -> str:
    """A YAML value as the text Java reads from it (``true``, not ``True``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _tcp_tls(args: argparse.Namespace) -> TlsOptions | None:
    """``--tls``: TLS on TCP, verifying servers as QUIC does (``--tls-ca``, else the
    environment's CA file, else the system's CAs)."""
    if not getattr(args, "tls", False):
        return None
    ca_file = getattr(args, "tls_ca", None) or os.environ.get(TRUST_CERT_PATH_VARIABLE) or None
    return _quic_tls(ca_file) or TlsOptions()


def _quic_tls(ca_file: str | None) -> TlsOptions | None:
    if ca_file is None:
        return None  # the client's default: the environment's CA file, else the system's
    if not os.path.isfile(ca_file):
        raise ConfigError(f"--tls-ca {ca_file}: no such file (give the CA certificate, PEM)")
    return TlsOptions(ca_file=ca_file)
