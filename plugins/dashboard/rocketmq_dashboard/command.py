"""The ``rocketmq dashboard`` command: serve the web console until Ctrl-C."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from rocketmq_core.cli.base import ACCESS_KEY_VARIABLE, DEFAULT_NAMESRV, credentials_of
from rocketmq_core.client.config import TRUST_CERT_PATH_VARIABLE
from rocketmq_core.errors import ConfigError
from rocketmq_core.plugins import PluginHost
from rocketmq_core.remoting.transport import TlsOptions

from .settings import LOOPBACK_NAMES, DashboardSettings

DEFAULT_LISTEN = "127.0.0.1:8082"


class DashboardCommand:
    help = "serve a web console of a cluster: brokers, topics, groups, messages, dead letters"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-n",
            "--namesrv",
            metavar="ADDR",
            help=f"name servers, 'host:port;host:port' (default: NAMESRV_ADDR, else"
            f" {DEFAULT_NAMESRV})",
        )
        parser.add_argument(
            "--listen",
            default=DEFAULT_LISTEN,
            metavar="HOST:PORT",
            help=f"where the dashboard serves HTTP (default {DEFAULT_LISTEN}: this machine"
            " only; it has no login of its own unless the brokers have ACL)",
        )
        parser.add_argument(
            "--tls", action="store_true", help="reach name servers and brokers over TLS on TCP"
        )
        parser.add_argument(
            "--tls-ca", metavar="FILE", help="CA file (PEM) to verify servers with (TLS, QUIC)"
        )
        parser.add_argument(
            "--access-key",
            metavar="KEY",
            help=f"sign requests with this ACL account until someone logs in (default:"
            f" {ACCESS_KEY_VARIABLE})",
        )
        parser.add_argument(
            "--secret-key", metavar="SECRET", help="the account's secret (default: its variable)"
        )

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        import uvicorn

        from .app import create_app

        listen_host, port = parse_listen(args.listen)
        settings = DashboardSettings(
            namesrv_addr=args.namesrv or os.environ.get("NAMESRV_ADDR") or DEFAULT_NAMESRV,
            tls=_tls(args) if args.tls else None,
            quic_tls=_tls(args),
            default_credentials=credentials_of(args),
        )
        settings.allow_listen_host(listen_host)
        if listen_host not in LOOPBACK_NAMES:
            print(
                f"rocketmq dashboard: warning: listening on {listen_host}, every machine that"
                " reaches it may change topics and offsets unless the brokers have ACL",
                file=sys.stderr,
            )
        try:
            listener = socket.create_server((listen_host, port))
        except OSError as exc:
            raise ConfigError(
                f"--listen {args.listen}: cannot listen there ({exc.strerror}): choose another"
                " port or address"
            ) from None
        bound_host, bound_port = listener.getsockname()[:2]
        address = f"{bound_host}:{bound_port}"
        print(f"rocketmq dashboard of {settings.namesrv_addr} on http://{address}/", flush=True)
        server = uvicorn.Server(
            uvicorn.Config(create_app(settings, host=host), log_level="warning", lifespan="off")
        )
        server.run(sockets=[listener])
        return 0


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:port`` for IPv6) → (host, port); ConfigError otherwise."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ConfigError(
            f"--listen {text!r}: give HOST:PORT, like {DEFAULT_LISTEN} (port 0: any free one)"
        )
    return host, int(port)


def _tls(args: argparse.Namespace) -> TlsOptions | None:
    ca_file = args.tls_ca or os.environ.get(TRUST_CERT_PATH_VARIABLE)
    if ca_file and not os.path.isfile(ca_file):
        raise ConfigError(f"--tls-ca {ca_file}: no such file (give the CA certificate, PEM)")
    if ca_file:
        return TlsOptions(ca_file=ca_file)
    return TlsOptions() if args.tls else None
