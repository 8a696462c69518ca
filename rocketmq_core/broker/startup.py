"""``rocketmq broker`` and ``rocketmq standalone`` (name server and broker in one process)."""

from __future__ import annotations

import argparse
import logging
import sys
from functools import partial
from pathlib import Path

import anyio

from .. import runtime
from ..config import add_allow_unknown_keys_option, format_properties
from ..data_paths import check_writable_directory
from ..namesrv.config import NamesrvConfig
from ..namesrv.server import NameServer
from ..plugins import PluginHost
from ..remoting.endpoint_settings import add_endpoint_options, apply_endpoint_options
from ..remoting.transport import parse_address
from .app import Broker
from .config import BrokerConfig

log = logging.getLogger("rocketmq.broker")

STANDALONE_HOME = Path.home() / "rocketmq-py"  # data of `rocketmq standalone` by default
# the gRPC proxy's port when the proxy_grpc plugin is installed (RocketMQ's grpcServerPort)
GRPC_SERVER_PORT = 8081


def add_broker_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-c", "--config-file", metavar="FILE", help="broker.conf (key=value)")
    add_allow_unknown_keys_option(parser)
    parser.add_argument("-n", "--namesrv-addr", metavar="ADDRS", help="host:port;host:port")
    parser.add_argument("--store", metavar="NAME", help="store plugin (default mmap)")
    parser.add_argument("--transport", metavar="NAME", help="transport plugin (default tcp)")
    parser.add_argument("--flush", choices=["async", "sync"], help="flushDiskType")
    add_endpoint_options(parser)
    parser.add_argument(
        "-p", "--print-config-item", action="store_true", help="print the settings and exit"
    )


def broker_settings(args: argparse.Namespace, **defaults: object) -> BrokerConfig:
    # the command's defaults, then broker.conf over them, then the options over both
    config = BrokerConfig.load(args.config_file, allow_unknown=args.allow_unknown_keys, **defaults)
    if args.namesrv_addr:
        config.namesrv_addr = args.namesrv_addr
    if args.store:
        config.store = args.store
    if args.transport:
        config.transport = args.transport
    if args.flush:
        config.flush_disk_type = "SYNC_FLUSH" if args.flush == "sync" else "ASYNC_FLUSH"
    apply_endpoint_options(args, config)
    if getattr(args, "quic", False):
        config.extra_listeners = f"quic://0.0.0.0:{config.listen_port}"
    config.validate()
    return config


class BrokerCommand:
    help = "start a broker"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_broker_options(parser)

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        config = broker_settings(args, grpc_server_port=GRPC_SERVER_PORT)
        if args.print_config_item:
            sys.stdout.write(config_text(config))
            return 0
        runtime.configure_logging()
        return runtime.run(_serve_broker, config, host)


class StandaloneCommand:
    help = "start a name server and a broker in one process (ports 9876 and 10911)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_broker_options(parser)
        parser.add_argument(
            "--namesrv-listen",
            metavar="HOST:PORT",
            default="0.0.0.0:9876",
            help="the name server's address (default 0.0.0.0:9876)",
        )
        parser.add_argument(
            "--quic",
            action="store_true",
            help="serve QUIC too, on the same port numbers (UDP); needs --tls-cert and --tls-key",
        )

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        listen = args.namesrv_listen
        host_part, port = parse_address("0.0.0.0" + listen if listen.startswith(":") else listen)
        namesrv = NamesrvConfig(
            kv_config_path=str(STANDALONE_HOME / "namesrv" / "kvConfig.json"),
            config_store_path=str(STANDALONE_HOME / "namesrv" / "namesrv.properties"),
            bind_address=host_part,
            listen_port=port,
        )
        if args.quic:
            namesrv.extra_listeners = f"quic://{namesrv.bind_address}:{namesrv.listen_port}"
        broker = broker_settings(
            args,
            broker_name="standalone",
            broker_ip1="127.0.0.1",
            store_path_root_dir=str(STANDALONE_HOME / "store"),
            grpc_server_port=GRPC_SERVER_PORT,
        )
        # one certificate for both servers of the process
        namesrv.tls_server_cert_path = broker.tls_server_cert_path
        namesrv.tls_server_key_path = broker.tls_server_key_path
        namesrv.validate_endpoints()
        if args.print_config_item:
            sys.stdout.write(config_text(broker))
            return 0
        # the name server's files go there, with no setting to move them: say so first
        check_writable_directory(
            STANDALONE_HOME / "namesrv",
            "the standalone data directory",
            remedy="set HOME to a writable directory",
        )
        runtime.configure_logging()
        return runtime.run(_serve_standalone, namesrv, broker, host)


def config_text(config: BrokerConfig) -> str:
    return format_properties(config.to_properties())


async def _serve_broker(config: BrokerConfig, host: PluginHost) -> int:
    broker = Broker(config, host=host)
    async with anyio.create_task_group() as task_group:
        address = await task_group.start(broker.run)
        received = await runtime.wait_for_stop_signal(
            announce=partial(
                log.info,
                "The broker[%s, %s] boot success. serializeType=JSON and name server is %s",
                config.broker_name,
                " and ".join([address, *broker.endpoints]),
                config.namesrv_addr or "(none)",
            )
        )
        log.info("%s received: shutting down", received.name)
        await broker.stop()
    log.info("broker %s stopped", config.broker_name)  # its store flushed and closed
    return 0


async def _serve_standalone(namesrv_config: NamesrvConfig, config: BrokerConfig, host) -> int:
    namesrv = NameServer(namesrv_config, host=host)
    async with anyio.create_task_group() as task_group:
        namesrv_address = await task_group.start(namesrv.run)
        assert namesrv.server is not None  # run() made it before it reported the address
        port = namesrv_address.rsplit(":", 1)[1]
        config.namesrv_addr = config.namesrv_addr or f"127.0.0.1:{port}"
        broker = Broker(config, host=host)
        broker_address = await task_group.start(broker.run)
        received = await runtime.wait_for_stop_signal(
            announce=partial(
                log.info,
                "rocketmq standalone ready: name server %s, broker %s (store %s in %s)",
                " and ".join([namesrv_address, *namesrv.server.extra_addresses]),
                " and ".join([broker_address, *broker.endpoints]),
                config.store,
                config.store_path_root_dir,
            )
        )
        log.info("%s received: shutting down", received.name)
        await broker.stop()
        await namesrv.stop()
    log.info("standalone stopped")  # the broker's store flushed and closed
    return 0
