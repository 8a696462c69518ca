"""ClientConfig: what every producer, consumer and admin client shares."""

from __future__ import annotations

import itertools
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..acl.signing import Credentials
from ..errors import ConfigError
from ..protocol.constants import NAME_PATTERN
from ..remoting.transport import TlsOptions, endpoint_scheme, parse_endpoint

_INSTANCES = itertools.count()
# the CA file QUIC clients verify servers with, like Java's tls.client.trustCertPath
TRUST_CERT_PATH_VARIABLE = "ROCKETMQ_TLS_TRUST_CERT_PATH"


def split_namesrv_addr(value: str | Sequence[str]) -> list[str]:
    """``"a:9876;b:9876"`` (as RocketMQ clients take it, ``quic://a:9876`` for QUIC) or
    a list, validated."""
    parts = value.split(";") if isinstance(value, str) else list(value)
    addresses = [part.strip() for part in parts if part.strip()]
    for address in addresses:
        parse_endpoint(address)  # a ConfigError that names the bad entry
    return addresses


def local_ip() -> str:
    """The address this host uses to reach others (no packet is sent), else loopback."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            address: str = probe.getsockname()[0]
            return address
    except OSError:
        return "127.0.0.1"


def group_problem(group: str, kind: str) -> str | None:
    """Why ``group`` cannot name a ``kind`` ("producer", "consumer") group, or None."""
    if not group or group == f"DEFAULT_{kind.upper()}" or not NAME_PATTERN.match(group):
        return f"{kind} group {group!r} is not valid: name your group (letters, digits, _-%|)"
    return None


@dataclass
class ClientConfig:
    """Settings of one client instance (Java's ClientConfig, in seconds not ms).

    ``namesrv_addr`` falls back to the ``NAMESRV_ADDR`` environment variable, as
    RocketMQ's clients do. Name servers given as ``quic://host:port`` are reached over
    QUIC, and so are the brokers that advertise a QUIC endpoint. ``transport`` reaches
    every address that names none (``host:port``). ``tls``: TCP uses TLS when it is
    set. QUIC always encrypts; ``quic_tls`` says how it verifies servers (a CA file,
    ``TlsOptions(verify=False)`` for local tests only); without it, with the CA file
    named by ``ROCKETMQ_TLS_TRUST_CERT_PATH``, else with the system's CAs.
    ``credentials``: every request is signed with them (ACL 1.0, Java's
    ``AclClientRPCHook``); their repr shows the access key only.
    """

    namesrv_addr: str | Sequence[str] = ""
    instance_name: str = "DEFAULT"
    client_ip: str = field(default_factory=local_ip)
    transport: str = "tcp"
    tls: TlsOptions | None = None
    quic_tls: TlsOptions | None = None
    request_timeout: float = 3.0
    poll_namesrv_interval: float = 30.0
    heartbeat_interval: float = 30.0
    persist_offset_interval: float = 5.0
    unit_name: str | None = None
    credentials: Credentials | None = None

    def signing_credentials(self) -> Credentials | None:
        """``credentials``, checked: both keys set, or ConfigError saying which is missing."""
        credentials = self.credentials
        if credentials is not None:
            if not credentials.access_key:
                raise ConfigError("credentials have a secret key but no access key: set both")
            if not credentials.secret_key:
                raise ConfigError(
                    f"credentials for access key {credentials.access_key!r} have no secret"
                    " key: set both"
                )
        return credentials

    def namesrv_addresses(self) -> list[str]:
        addresses = split_namesrv_addr(self.namesrv_addr or os.environ.get("NAMESRV_ADDR", ""))
        if not addresses:
            raise ConfigError(
                "no name server address: pass namesrv_addr='host:9876' or set NAMESRV_ADDR"
            )
        return addresses

    def quic_verification(self) -> TlsOptions:
        """How QUIC verifies servers: ``quic_tls``, else the CA file of the environment."""
        if self.quic_tls is not None:
            return self.quic_tls
        return TlsOptions(ca_file=os.environ.get(TRUST_CERT_PATH_VARIABLE) or None)

    def broker_transport(self) -> str:
        """How brokers are reached: the name servers' transport when they all name one."""
        schemes = {endpoint_scheme(address) for address in self.namesrv_addresses()}
        if len(schemes) == 1:
            (scheme,) = schemes
            if scheme is not None:
                return scheme
        return self.transport

    def client_id(self) -> str:
        """``ip@instance``; the default instance becomes ``pid#n`` so that two clients of
        one process never share an id (the broker keys consumers by it)."""
        instance = self.instance_name
        if instance == "DEFAULT":
            instance = f"{os.getpid()}#{next(_INSTANCES)}"
        client_id = f"{self.client_ip}@{instance}"
        return f"{client_id}@{self.unit_name}" if self.unit_name else client_id
