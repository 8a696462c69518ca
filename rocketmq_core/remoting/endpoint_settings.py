"""Settings a server shares for its extra listeners (QUIC beside TCP) and their TLS,
and the limits it sets its clients (connections, idle time, memory).

Keys follow RocketMQ's TLS system properties (``tls.server.certPath``, ...; see
tls_settings.py). QUIC always encrypts, with ``tls.server.certPath``; the TCP listeners
serve TLS as ``tls.server.mode`` says. The limits are in docs/operations.md.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from ..config import setting
from ..errors import ConfigError
from .budgets import MiB, ServerLimits
from .server import Listener, parse_listeners
from .tls_settings import TlsSettings
from .transport import TlsMode, TlsOptions, Transport, encrypting_transports, parse_endpoint


@dataclasses.dataclass
class EndpointSettings(TlsSettings):
    extra_listeners: str = setting(
        "",
        help="more addresses to serve, like quic://0.0.0.0:10911 (';' between them)",
    )

    server_max_connections: int = setting(
        0,
        help="most client connections at once; more are accepted and closed at once."
        " 0: the open-files limit less a quarter of it (at least 256) for store files",
        minimum=0,
    )
    server_channel_max_idle_time_seconds: int = setting(
        120, help="close a connection with nothing read or sent for this long (0: never)", minimum=0
    )
    write_buffer_high_water_mark: int = setting(
        4 * MiB,
        help="bytes of answers unsent to a client at which its requests stop being read",
        minimum=1,
    )
    write_buffer_low_water_mark: int = setting(
        1 * MiB, help="... and below which they are read again", minimum=0
    )
    server_max_unsent_bytes_per_connection: int = setting(
        64 * MiB,
        help="answers one client may leave unread; one more is answered SYSTEM_BUSY instead",
        minimum=1,
    )
    server_max_unsent_bytes: int = setting(
        256 * MiB,
        help="answers all clients together may leave unread; more are answered SYSTEM_BUSY",
        minimum=1,
    )
    server_incomplete_frame_timeout_seconds: int = setting(
        30, help="close a connection whose frame stays incomplete this long (0: never)", minimum=0
    )
    server_max_incomplete_frame_bytes: int = setting(
        128 * MiB,
        help="bytes of incomplete frames held for all clients; the connection going over closes",
        minimum=1,
    )

    def server_limits(self) -> ServerLimits:
        return ServerLimits(
            max_connections=self.server_max_connections,
            idle_seconds=self.server_channel_max_idle_time_seconds,
            write_high_water=self.write_buffer_high_water_mark,
            write_low_water=self.write_buffer_low_water_mark,
            max_unsent_per_connection=self.server_max_unsent_bytes_per_connection,
            max_unsent_total=self.server_max_unsent_bytes,
            incomplete_frame_seconds=self.server_incomplete_frame_timeout_seconds,
            max_incomplete_total=self.server_max_incomplete_frame_bytes,
        )

    def validate_endpoints(self) -> None:
        if self.write_buffer_low_water_mark > self.write_buffer_high_water_mark:
            raise ConfigError(
                f"writeBufferLowWaterMark ({self.write_buffer_low_water_mark}) is above"
                f" writeBufferHighWaterMark ({self.write_buffer_high_water_mark}):"
                " set it lower"
            )
        for address in self.extra_listener_addresses():
            parse_endpoint(address)  # a ConfigError naming the bad entry
        if bool(self.tls_server_cert_path) != bool(self.tls_server_key_path):
            raise ConfigError("tls.server.certPath and tls.server.keyPath go together: set both")
        self.validate_tls()

    def extra_listener_addresses(self) -> list[str]:
        return [part.strip() for part in self.extra_listeners.split(";") if part.strip()]

    def server_tls(self) -> TlsOptions | None:
        """The certificate of listeners that always encrypt (QUIC)."""
        if not self.tls_server_cert_path:
            return None
        return TlsOptions(cert_file=self.tls_server_cert_path, key_file=self.tls_server_key_path)

    def tls_for(self, transport_name: str) -> TlsOptions | None:
        """How a listener of ``transport_name`` serves TLS: TCP as tls.server.mode says."""
        if transport_name == "tcp":
            return self.resolved_tls().listener_tls()
        return self.server_tls()

    def client_tls(self) -> TlsOptions | None:
        """How this server's own TCP connections (to name servers, to a master) use TLS."""
        return self.resolved_tls().outbound_tls()

    def client_transports(
        self, transports: Callable[[str], Transport]
    ) -> Callable[[str], Transport]:
        """The transports this server dials peers with (a broker its quic:// name
        servers); QUIC verifies them with ``tls.client.trustCertPath``."""
        trust = TlsOptions(ca_file=self.tls_client_trust_cert_path or None)
        return encrypting_transports(transports, trust)

    def listeners(self, transports: Callable[[str], Transport]) -> list[Listener]:
        listeners = parse_listeners(self.extra_listeners, transports, None)
        return [
            dataclasses.replace(listener, tls=self.tls_for(listener.transport.name))
            for listener in listeners
        ]


def add_endpoint_options(parser: argparse.ArgumentParser) -> None:
    """The command-line options of a server's extra listeners and their TLS."""
    parser.add_argument(
        "--extra-listener",
        action="append",
        metavar="ADDRESS",
        help="serve this address too, like quic://0.0.0.0:10911 (repeatable): extraListeners",
    )
    add_tls_options(parser)


def add_tls_options(parser: argparse.ArgumentParser) -> None:
    """The command-line options of a server's TLS (of broker.conf's tls.* keys)."""
    parser.add_argument("--tls-cert", metavar="FILE", help="tls.server.certPath (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", help="tls.server.keyPath (PEM)")
    parser.add_argument(
        "--tls-mode",
        choices=[mode.value for mode in TlsMode],
        help="tls.server.mode: TLS on the TCP ports (default: disabled)",
    )


def apply_endpoint_options(args: argparse.Namespace, settings: EndpointSettings) -> None:
    if args.extra_listener:
        settings.extra_listeners = ";".join(args.extra_listener)
    apply_tls_options(args, settings)


def apply_tls_options(args: argparse.Namespace, settings: TlsSettings) -> None:
    if args.tls_cert:
        settings.tls_server_cert_path = args.tls_cert
    if args.tls_key:
        settings.tls_server_key_path = args.tls_key
    if getattr(args, "tls_mode", None):
        settings.tls_server_mode = args.tls_mode
