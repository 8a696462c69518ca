"""The ``rocketmq certs`` command: a self-signed certificate pair for development TLS."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rocketmq_core.plugins import PluginHost

USAGE = "usage: rocketmq certs create [--dir DIR] [--host NAME ...] [--days N] [--force]"


class CertsCommand:
    help = "create a self-signed TLS certificate and key for development (QUIC and TCP)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="certs_action", metavar="ACTION")
        create = actions.add_parser("create", help=self.help, description=self.help)
        create.add_argument(
            "--dir",
            type=Path,
            default=Path("certs"),
            help="where to write cert.pem and key.pem (default: ./certs)",
        )
        create.add_argument(
            "--host",
            action="append",
            default=[],
            metavar="NAME",
            help="another DNS name or IP address the certificate is valid for (repeatable)",
        )
        create.add_argument(
            "--days", type=int, default=365, help="validity in days, up to ten years (default 365)"
        )
        create.add_argument("--force", action="store_true", help="replace existing files")

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        if args.certs_action != "create":
            print(USAGE, file=sys.stderr)
            return 2
        # loaded here, not with the module: every `rocketmq` start builds this command's
        # parser, and cryptography costs a broker ~8 MB of memory and ~50 ms to import
        from .certs import write_self_signed

        # a ConfigError reaches the CLI, which prints it on one line and exits 2
        pair = write_self_signed(args.dir, args.host, days=args.days, force=args.force)
        cert, key = pair.cert_file.resolve(), pair.key_file.resolve()
        sys.stdout.write(
            f"certificate: {cert}\n"
            f"private key: {key}\n"
            "\n"
            "For development only: the certificate is self-signed and is its own CA.\n"
            "Name server and broker configuration:\n"
            f"    tls.server.certPath={cert}\n"
            f"    tls.server.keyPath={key}\n"
            "Clients trust it as their CA file:\n"
            "    from rocketmq_core.remoting.transport import TlsOptions\n"
            f'    TlsOptions(ca_file="{cert}")\n'
        )
        return 0
