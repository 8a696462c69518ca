"""``rocketmq proxy -n NAMESRV [--grpc-port 8081]``: the gRPC proxy in front of a cluster."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

import anyio

from rocketmq_core import runtime
from rocketmq_core.acl.rules import acl_home
from rocketmq_core.acl.service import AclService
from rocketmq_core.acl.signing import Credentials
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.errors import ConfigError
from rocketmq_core.remoting.endpoint_settings import add_tls_options, apply_tls_options
from rocketmq_core.remoting.tls_settings import TlsSettings
from rocketmq_core.remoting.transport import TlsOptions

from .local import DEFAULT_GRPC_PORT

if TYPE_CHECKING:
    from .server import GrpcProxy

log = logging.getLogger("rocketmq.proxy")


class ProxyCommand:
    help = "serve RocketMQ 5's gRPC protocol (the 5.x clients) in front of a cluster's brokers"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-n", "--namesrv-addr", required=True, help="name servers, host:port;host:port"
        )
        parser.add_argument(
            "--grpc-port",
            type=int,
            default=DEFAULT_GRPC_PORT,
            help=f"the gRPC port (grpcServerPort, default {DEFAULT_GRPC_PORT}; 0: any free)",
        )
        parser.add_argument("--host", default="0.0.0.0", help="the address to listen on")
        parser.add_argument(
            "--acl-home",
            metavar="ROCKETMQ_HOME",
            help="ACL on: check the 5.x clients' signatures against ROCKETMQ_HOME/conf/"
            "plain_acl.yml (and plain_acl/*.yml), reloaded when they change",
        )
        parser.add_argument(
            "--access-key", help="with --secret-key: sign the proxy's requests to brokers"
        )
        parser.add_argument("--secret-key", help="the secret of --access-key")
        parser.add_argument(
            "--advertised-host",
            help="the host clients are told to reach when they do not say (default: this"
            " machine's IP)",
        )
        # as Apache's proxy: tls.server.mode (and /etc/rocketmq/tls.properties) covers gRPC
        add_tls_options(parser)
        parser.add_argument(
            "--tls-enable",
            choices=["true", "false"],
            help="tls.enable: the proxy's own connections to name servers and brokers use"
            " TLS (default: when --tls-mode is enforcing)",
        )

    def run(self, args: argparse.Namespace, host: object) -> int:
        if not 0 <= args.grpc_port <= 65535:
            print(f"rocketmq proxy: --grpc-port {args.grpc_port} is not a port", file=sys.stderr)
            return 2
        if bool(args.access_key) != bool(args.secret_key):
            print("rocketmq proxy: pass --access-key and --secret-key together", file=sys.stderr)
            return 2
        credentials = Credentials(args.access_key, args.secret_key) if args.access_key else None
        try:
            tls, outbound = _tls_of(args)
            # the TLS listener is the tcp transport's (a ConfigError when not installed)
            tcp = host.registry.transports.get("tcp") if tls else None  # type: ignore[attr-defined]
        except ConfigError as exc:
            print(f"rocketmq proxy: {exc}", file=sys.stderr)
            return 2
        from .server import GrpcProxy  # grpc loads only for this command

        runtime.configure_logging()
        proxy = GrpcProxy(
            args.namesrv_addr,
            host=args.host,
            port=args.grpc_port,
            advertised_host=args.advertised_host,
            client_config=ClientConfig(
                namesrv_addr=args.namesrv_addr,
                instance_name="rocketmq-grpc-proxy",
                credentials=credentials,
                tls=outbound,
            ),
            acl=AclService.for_broker(acl_home(args.acl_home)) if args.acl_home else None,
            tls=tls,
            transport=tcp,
        )
        try:
            runtime.run(_serve_until_signal, proxy)
        except (ConfigError, ExceptionGroup) as exc:
            refusal = _sole_config_error(exc)
            if refusal is None:
                raise
            print(f"rocketmq proxy: {refusal}", file=sys.stderr)
            return 2
        return 0


def _tls_of(args: argparse.Namespace) -> tuple[TlsOptions | None, TlsOptions | None]:
    """How the gRPC port serves TLS and how the proxy's own connections to name servers
    and brokers use it (None: plain), from the --tls-* options and tls.properties; as
    Apache's, its own connections use TLS when the mode is enforcing."""
    settings = TlsSettings()
    apply_tls_options(args, settings)
    if args.tls_enable:
        settings.tls_enable = args.tls_enable
    if bool(settings.tls_server_cert_path) != bool(settings.tls_server_key_path):
        raise ConfigError("--tls-cert and --tls-key go together: pass both")
    settings.validate_tls()
    resolved = settings.resolved_tls()
    return resolved.listener_tls(), resolved.outbound_tls()


def _sole_config_error(error: BaseException) -> ConfigError | None:
    """The ConfigError (a port in use, unusable ACL files) that task groups wrapped."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error if isinstance(error, ConfigError) else None


async def _serve_until_signal(proxy: GrpcProxy) -> None:
    if proxy.acl is not None:
        await proxy.acl.open()  # a ConfigError naming the file when it cannot be used
    async with anyio.create_task_group() as group:
        if proxy.acl is not None:
            group.start_soon(proxy.acl.watch)
        port = await group.start(proxy.serve)
        await runtime.wait_for_stop_signal(
            lambda: log.info(
                "ready: gRPC proxy on port %d for %s", port, proxy.client_config.namesrv_addr
            )
        )
        group.cancel_scope.cancel()
