"""``rocketmq namesrv``: start a name server from RocketMQ-style settings."""

from __future__ import annotations

import argparse
import logging
import sys
from functools import partial

import anyio

from .. import runtime
from ..config import add_allow_unknown_keys_option
from ..plugins import PluginHost
from ..remoting.endpoint_settings import add_endpoint_options, apply_endpoint_options
from ..remoting.transport import parse_address
from .config import NamesrvConfig
from .server import NameServer

log = logging.getLogger("rocketmq.namesrv")


class NamesrvCommand:
    help = "start a name server"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "-c",
            "--config-file",
            metavar="FILE",
            help="namesrv.conf: RocketMQ key=value settings (listenPort, kvConfigPath, ...)",
        )
        add_allow_unknown_keys_option(parser)
        parser.add_argument(
            "-p",
            "--print-config-item",
            action="store_true",
            help="print the effective configuration and exit",
        )
        parser.add_argument(
            "--listen",
            metavar="HOST:PORT",
            help="address to listen on; overrides bindAddress and listenPort (port 0: any free)",
        )
        add_endpoint_options(parser)

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        config = NamesrvConfig.load(args.config_file, allow_unknown=args.allow_unknown_keys)
        if args.listen:
            config.bind_address, config.listen_port = parse_address(args.listen)
        apply_endpoint_options(args, config)
        config.validate()
        config.validate_endpoints()
        if args.print_config_item:
            sys.stdout.write(NameServer(config, host=host).config_text())
            return 0
        runtime.configure_logging()
        return runtime.run(serve_until_signalled, config, host)


async def serve_until_signalled(config: NamesrvConfig, host: PluginHost) -> int:
    namesrv = NameServer(config, host=host)
    async with anyio.create_task_group() as task_group:
        address = await task_group.start(namesrv.run)
        assert namesrv.server is not None  # run() made it before it reported the address
        listening = " and ".join([address, *namesrv.server.extra_addresses])
        received = await runtime.wait_for_stop_signal(
            announce=partial(
                log.info,
                "The Name Server boot success. serializeType=JSON, listening on %s",
                listening,
            )
        )
        log.info("%s received: shutting down", received.name)
        await namesrv.stop()
    log.info("The Name Server stopped")
    return 0
