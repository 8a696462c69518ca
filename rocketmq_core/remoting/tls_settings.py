"""TLS settings of a server's TCP listeners and of its own connections, by Apache's names.

Apache reads them as Java system properties; here they are keys of broker.conf and
namesrv.conf. A properties file (``tls.config.file``) overrides every one of them but
``tls.server.mode`` and ``tls.enable``, as Apache's does. docs/operations.md ("TLS")
has the table.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

from ..config import Settings, parse_properties, setting
from ..errors import ConfigError
from .transport import ClientAuth, TlsMode, TlsOptions

log = logging.getLogger("rocketmq.remoting")

DEFAULT_TLS_CONFIG_FILE = "/etc/rocketmq/tls.properties"
# the keys tls.config.file may not set
_NOT_FROM_FILE = frozenset({"tls.server.mode", "tls.enable", "tls.config.file"})


@dataclasses.dataclass
class TlsSettings(Settings):
    tls_server_mode: str = setting(
        TlsMode.DISABLED.value,
        key="tls.server.mode",
        help="TLS on the TCP ports: disabled, permissive (plain and TLS on each port) or"
        " enforcing (TLS only). Apache's default is permissive",
    )
    tls_enable: str = setting(
        "",
        key="tls.enable",
        help="true: this server's own connections (broker to name servers) use TLS;"
        " empty: when tls.server.mode is enforcing",
    )
    tls_config_file: str = setting(
        DEFAULT_TLS_CONFIG_FILE,
        key="tls.config.file",
        help="properties file whose tls.* keys override these (but the two above);"
        " the default path is read only when it exists",
    )
    tls_test_mode_enable: bool = setting(
        True,
        key="tls.test.mode.enable",
        help="without tls.server.certPath, serve TLS with a self-signed certificate made"
        " at start (clients cannot verify it)",
    )
    tls_server_cert_path: str = setting(
        "", key="tls.server.certPath", help="certificate chain (PEM) of the TLS listeners"
    )
    tls_server_key_path: str = setting(
        "", key="tls.server.keyPath", help="its private key (PEM, PKCS#8, may be encrypted)"
    )
    tls_server_key_password: str = setting(
        "",
        key="tls.server.keyPassword",
        help="password of an encrypted tls.server.keyPath",
        secret=True,
    )
    tls_server_need_client_auth: str = setting(
        ClientAuth.NONE.value,
        key="tls.server.need.client.auth",
        help="whether TLS clients show a certificate: none, optional or require",
    )
    tls_server_auth_client: bool = setting(
        False,
        key="tls.server.authClient",
        help="verify client certificates with tls.server.trustCertPath (needed when"
        " tls.server.need.client.auth is optional or require)",
    )
    tls_server_trust_cert_path: str = setting(
        "", key="tls.server.trustCertPath", help="CA (PEM) client certificates are verified by"
    )
    tls_client_cert_path: str = setting(
        "", key="tls.client.certPath", help="certificate (PEM) this server shows as a client"
    )
    tls_client_key_path: str = setting("", key="tls.client.keyPath", help="its private key (PEM)")
    tls_client_key_password: str = setting(
        "",
        key="tls.client.keyPassword",
        help="password of an encrypted tls.client.keyPath",
        secret=True,
    )
    tls_client_auth_server: bool = setting(
        False,
        key="tls.client.authServer",
        help="verify the servers this one connects to over TCP with tls.client.trustCertPath",
    )
    tls_client_trust_cert_path: str = setting(
        "",
        key="tls.client.trustCertPath",
        help="CA (PEM) servers are verified by (QUIC always verifies); empty: the system's CAs",
    )

    def tls_mode(self) -> TlsMode:
        """``tls.server.mode``; a value Apache does not know means permissive, as there."""
        try:
            return TlsMode(self.tls_server_mode.strip().lower())
        except ValueError:
            return TlsMode.PERMISSIVE

    def validate_tls(self) -> None:
        """ConfigErrors naming the key, the value and what it may be, or the file that
        cannot be read; a warning for a mode Apache would take as permissive."""
        if self.tls_server_mode.strip().lower() not in {mode.value for mode in TlsMode}:
            log.warning(
                "tls.server.mode=%s is not disabled, permissive or enforcing: taken as"
                " permissive, as Apache RocketMQ does",
                self.tls_server_mode,
            )
        self._outbound_enabled()
        resolved = self.resolved_tls()
        resolved._client_auth()
        listener = resolved.listener_tls()
        if listener is not None:
            listener.check_client_files()
        outbound = resolved.outbound_tls()
        if outbound is not None:
            outbound.check_client_files()

    def resolved_tls(self) -> TlsSettings:
        """These settings with ``tls.config.file`` applied over them (a new object)."""
        resolved = TlsSettings(
            **{field.name: getattr(self, field.name) for field in dataclasses.fields(TlsSettings)}
        )
        path = self.tls_config_file.strip()
        if not path or (path == DEFAULT_TLS_CONFIG_FILE and not os.path.exists(path)):
            return resolved
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigError(
                f"cannot read tls.config.file {path}: {reason}; fix the path or set"
                " tls.config.file= (empty) to read none"
            ) from None
        values = {
            key: value for key, value in parse_properties(text).items() if key not in _NOT_FROM_FILE
        }
        resolved.update(values, source=path)
        return resolved

    def listener_tls(self) -> TlsOptions | None:
        """How the TCP listeners serve TLS; None when they serve plain only. (Call it on
        ``resolved_tls()``.)"""
        mode = self.tls_mode()
        if mode is TlsMode.DISABLED:
            return None
        if not self.tls_server_cert_path and not self.tls_test_mode_enable:
            raise ConfigError(
                f"tls.server.mode={mode} needs tls.server.certPath and tls.server.keyPath,"
                " or tls.test.mode.enable=true for a self-signed certificate"
            )
        client_auth = self._client_auth()
        return TlsOptions(
            cert_file=self.tls_server_cert_path or None,
            key_file=self.tls_server_key_path or None,
            key_password=self.tls_server_key_password or None,
            ca_file=self.tls_server_trust_cert_path or None,
            mode=mode,
            client_auth=client_auth,
            self_signed=self.tls_test_mode_enable,
        )

    def outbound_tls(self) -> TlsOptions | None:
        """How this server's own TCP connections use TLS (``tls.enable``); None: plain.
        As Apache's client, the certificate chain is checked (with authServer) but not
        the host name, and no server is verified without ``tls.client.authServer``."""
        if not self._outbound_enabled():
            return None
        return TlsOptions(
            cert_file=self.tls_client_cert_path or None,
            key_file=self.tls_client_key_path or None,
            key_password=self.tls_client_key_password or None,
            ca_file=self.tls_client_trust_cert_path or None,
            verify=self.tls_client_auth_server,
            check_hostname=False,
        )

    def _outbound_enabled(self) -> bool:
        value = self.tls_enable.strip().lower()
        if value == "":
            return self.tls_mode() is TlsMode.ENFORCING
        if value not in ("true", "false"):
            raise ConfigError(
                f"tls.enable must be true, false or empty (TLS when tls.server.mode is"
                f" enforcing), not {self.tls_enable!r}"
            )
        return value == "true"

    def _client_auth(self) -> ClientAuth:
        value = self.tls_server_need_client_auth.strip().lower()
        try:
            client_auth = ClientAuth(value or ClientAuth.NONE)
        except ValueError:
            raise ConfigError(
                "tls.server.need.client.auth must be none, optional or require,"
                f" not {self.tls_server_need_client_auth!r}"
            ) from None
        if client_auth is not ClientAuth.NONE and not self.tls_server_auth_client:
            raise ConfigError(
                f"tls.server.need.client.auth={client_auth} needs tls.server.authClient=true"
                " and tls.server.trustCertPath: client certificates are always verified here"
            )
        if client_auth is not ClientAuth.NONE and not self.tls_server_trust_cert_path.strip():
            raise ConfigError(
                f"tls.server.need.client.auth={client_auth} needs tls.server.trustCertPath:"
                " the CA (PEM) client certificates are verified with; the system's CAs are"
                " never used for that"
            )
        return client_auth
