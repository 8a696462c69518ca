"""SSL contexts of TCP listeners and connectors, built from TlsOptions.

Every file problem is a ConfigError that names the file: the ssl module would
otherwise report it later, deep in a handshake, or as a bare OpenSSL code.
"""

from __future__ import annotations

import datetime
import logging
import os
import ssl
import tempfile
from pathlib import Path

from rocketmq_core.errors import ConfigError
from rocketmq_core.remoting.transport import ClientAuth, TlsOptions

log = logging.getLogger("rocketmq.remoting")
SELF_SIGNED_NAME = "rocketmq-py test mode"
SELF_SIGNED_DAYS = 365
_VERIFY_MODES = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.OPTIONAL: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRE: ssl.CERT_REQUIRED,
}


def server_context(tls: TlsOptions) -> ssl.SSLContext:
    """The context of a TLS listener: its certificate (or one made now, in test mode)
    and, when clients must show one, the CA their certificates are verified with.

    Built bare, never from the system's CAs: with them any certificate a public CA
    issued would pass mutual TLS."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    tls.check_client_files()
    if tls.cert_file and tls.key_file:
        _load_chain(context, tls.cert_file, tls.key_file, tls.key_password)
    elif tls.self_signed and not tls.cert_file and not tls.key_file:
        _load_self_signed(context)
    else:
        raise ConfigError("TLS on a listener needs both a certificate file and a key file")
    if tls.alpn_protocols:
        context.set_alpn_protocols(list(tls.alpn_protocols))
    context.verify_mode = _VERIFY_MODES[tls.client_auth]
    if tls.client_auth is not ClientAuth.NONE:
        if not tls.ca_file:
            raise ConfigError(
                f"TLS client auth {tls.client_auth} needs the CA file client certificates"
                " are verified with (tls.server.trustCertPath)"
            )
        try:
            context.load_verify_locations(cafile=tls.ca_file)
        except ssl.SSLError as exc:
            raise ConfigError(f"TLS CA file {tls.ca_file}: not a PEM certificate ({exc})") from None
        except OSError as exc:  # gone or unreadable since it was looked at
            raise ConfigError(f"TLS CA file {tls.ca_file}: {exc.strerror}") from None
    return context


# a file's identity as far as a change goes: None when it cannot be looked at
FileState = tuple[int, int, int] | None


class ServerContexts:
    """A TLS listener's context, made again when its certificate, key or CA file
    changes, as Apache's brokers watch theirs: a renewed certificate serves the next
    handshake without a restart. ``current`` looks at the files (a stat each) at every
    handshake; files that changed but cannot be used (one of a pair written, a bad
    password) keep the context in force, with one log line per such state of the files."""

    def __init__(self, tls: TlsOptions) -> None:
        self._tls = tls
        self._paths = tuple(path for path in (tls.cert_file, tls.key_file, tls.ca_file) if path)
        self._state = self._files_state()
        self._context = server_context(tls)
        self._failed_state: tuple[FileState, ...] | None = None

    def current(self) -> ssl.SSLContext:
        state = self._files_state()
        if state == self._state or state == self._failed_state:
            return self._context
        try:
            context = server_context(self._tls)
        except (ConfigError, OSError, ssl.SSLError, ValueError) as exc:  # never the listener's
            log.error(
                "TLS files changed but cannot be used; the certificate in force stays: %s", exc
            )
            self._failed_state = state
            return self._context
        self._context, self._state, self._failed_state = context, state, None
        log.info("TLS certificate reloaded from %s", ", ".join(self._paths))
        return context

    def _files_state(self) -> tuple[FileState, ...]:
        return tuple(_file_state(path) for path in self._paths)


def _file_state(path: str) -> FileState:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size, status.st_ino


def client_context(tls: TlsOptions) -> ssl.SSLContext:
    """The context of a TLS connection: how the server is verified (``ca_file``, else
    the system's CAs; not at all without ``verify``) and the client's own certificate."""
    tls.check_client_files()
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=tls.ca_file)
    except ssl.SSLError as exc:
        raise ConfigError(f"TLS CA file {tls.ca_file}: not a PEM certificate ({exc})") from None
    if not tls.verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif not tls.check_hostname:
        context.check_hostname = False  # the chain is still verified, as Java's client does
    if tls.cert_file and tls.key_file:
        _load_chain(context, tls.cert_file, tls.key_file, tls.key_password)
    return context


def _load_chain(
    context: ssl.SSLContext, cert_file: str, key_file: str, password: str | None
) -> None:
    try:
        # OpenSSL reads PKCS#8 keys, encrypted ones too when given their password; without
        # one it would ask on the terminal, so an empty one is given instead
        context.load_cert_chain(cert_file, key_file, password=password or _no_password)
    except ssl.SSLError as exc:
        hint = "a wrong or missing key password" if _encrypted(key_file) else "not PEM files"
        raise ConfigError(
            f"cannot load TLS certificate {cert_file} with key {key_file}: {hint}"
            f" ({exc.reason or exc})"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot load TLS certificate {cert_file} with key {key_file}: {exc.strerror}"
        ) from None


def _no_password() -> bytes:
    return b""


def _encrypted(key_file: str) -> bool:
    try:
        return b"ENCRYPTED" in Path(key_file).read_bytes()[:200]
    except OSError:
        return False


def _load_self_signed(context: ssl.SSLContext) -> None:
    """A certificate for this start only (Apache's test mode): it encrypts, and no client
    can verify it. ssl loads certificates from files only, so they pass through a private
    temporary directory that is removed at once."""
    cert_pem, key_pem = self_signed_pair()
    with tempfile.TemporaryDirectory(prefix="rocketmq-tls-") as folder:
        cert_file, key_file = Path(folder, "cert.pem"), Path(folder, "key.pem")
        cert_file.write_bytes(cert_pem)
        key_file.write_bytes(key_pem)  # the directory is 0700: no one else reads the key
        context.load_cert_chain(cert_file, key_file)


def self_signed_pair() -> tuple[bytes, bytes]:
    """(certificate, key) as PEM: a new P-256 key and a certificate signed with it."""
    from cryptography import x509  # only test mode needs it
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SELF_SIGNED_NAME)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem
