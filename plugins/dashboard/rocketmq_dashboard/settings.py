"""What one dashboard process serves: which cluster, how it reaches it, and its secrets."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from rocketmq_core.acl.signing import Credentials
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.remoting.transport import TlsOptions

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass
class DashboardSettings:
    namesrv_addr: str
    tls: TlsOptions | None = None
    quic_tls: TlsOptions | None = None
    # signs every request when no one has logged in (--access-key/--secret-key)
    default_credentials: Credentials | None = None
    # signs session cookies and CSRF tokens; new each start, so restarting logs everyone out
    secret: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    # Host headers answered: a page of another site that a DNS trick points at 127.0.0.1
    # arrives under its own name and is refused
    allowed_hosts: list[str] = field(default_factory=lambda: list(LOOPBACK_NAMES))

    def allow_listen_host(self, host: str) -> None:
        """Also answer to the name or address the dashboard listens on; to any name when
        it listens on every interface (0.0.0.0, ::)."""
        if host in ("0.0.0.0", "::", ""):
            self.allowed_hosts = ["*"]
        elif host not in self.allowed_hosts:
            self.allowed_hosts.append(host)

    def client_config(self, credentials: Credentials | None) -> ClientConfig:
        return ClientConfig(
            namesrv_addr=self.namesrv_addr,
            instance_name="DASHBOARD",
            tls=self.tls,
            quic_tls=self.quic_tls,
            credentials=credentials or self.default_credentials,
        )
