"""Settings a server shares for its extra listeners (QUIC beside TCP) and their TLS.

Keys follow RocketMQ's TLS system properties (``tls.server.certPath``, ...). They
matter to transports that encrypt: QUIC always does; the TCP listener stays plain,
as the official clients expect.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from ..config import Settings, setting
from ..errors import ConfigError
from .server import Listener, parse_listeners
from .transport import TlsOptions, Transport, encrypting_transports, parse_endpoint


@dataclasses.dataclass
class EndpointSettings(Settings):
    extra_listeners: str = setting(
        "",
        help="more addresses to serve, like quic://0.0.0.0:10911 (';' between them)",
    )
    tls_server_cert_path: str = setting(
        "", key="tls.server.certPath", help="certificate (PEM) of encrypted listeners"
    )
    tls_server_key_path: str = setting(
        "", key="tls.server.keyPath", help="private key (PEM) of encrypted listeners"
    )
    tls_client_trust_cert_path: str = setting(
        "",
        key="tls.client.trustCertPath",
        help="CA (PEM) to verify encrypted peers by; empty: the system's CAs",
    )

    def validate_endpoints(self) -> None:
        for address in self.extra_listener_addresses():
            parse_endpoint(address)  # a ConfigError naming the bad entry
        if bool(self.tls_server_cert_path) != bool(self.tls_server_key_path):
            raise ConfigError("tls.server.certPath and tls.server.keyPath go together: set both")

    def extra_listener_addresses(self) -> list[str]:
        return [part.strip() for part in self.extra_listeners.split(";") if part.strip()]

    def server_tls(self) -> TlsOptions | None:
        if not self.tls_server_cert_path:
            return None
        return TlsOptions(cert_file=self.tls_server_cert_path, key_file=self.tls_server_key_path)

    def client_transports(
        self, transports: Callable[[str], Transport]
    ) -> Callable[[str], Transport]:
        """The transports this server dials peers with (a broker its quic:// name
        servers); QUIC verifies them with ``tls.client.trustCertPath``."""
        trust = TlsOptions(ca_file=self.tls_client_trust_cert_path or None)
        return encrypting_transports(transports, trust)

    def listeners(self, transports: Callable[[str], Transport]) -> list[Listener]:
        return parse_listeners(self.extra_listeners, transports, self.server_tls())


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    """The command-line options of a server's extra listeners and their TLS."""
    parser.add_argument(
        "--extra-listener",
        action="append",
        metavar="ADDRESS",
        help="serve this address too, like quic://0.0.0.0:10911 (repeatable): extraListeners",
    )
    parser.add_argument("--tls-cert", metavar="FILE", help="tls.server.certPath (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", help="tls.server.keyPath (PEM)")


def apply_endpoint_options(args: argparse.Namespace, settings: EndpointSettings) -> None:
    if args.extra_listener:
        settings.extra_listeners = ";".join(args.extra_listener)
    if args.tls_cert:
        settings.tls_server_cert_path = args.tls_cert
    if args.tls_key:
        settings.tls_server_key_path = args.tls_key
