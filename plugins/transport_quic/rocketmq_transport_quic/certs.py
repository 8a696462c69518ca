"""A self-signed certificate and key for development: one file pair serves and is trusted.

The certificate is its own CA (BasicConstraints ca=True), so a listener serves it with
its key and a client names the same file as its CA file.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from rocketmq_core.errors import ConfigError

COMMON_NAME = "rocketmq-py development"
CERT_NAME = "cert.pem"
KEY_NAME = "key.pem"
MAX_DAYS = 3650
# clocks of two development machines rarely agree to the second
BACKDATE = datetime.timedelta(minutes=1)


@dataclass(frozen=True)
class CertificatePair:
    cert_file: Path
    key_file: Path


def write_self_signed(
    directory: Path, hosts: Sequence[str] = (), *, days: int = 365, force: bool = False
) -> CertificatePair:
    """Write ``cert.pem`` and ``key.pem`` (mode 0600) in ``directory``, created if missing.

    The names are localhost, this machine's hostname, 127.0.0.1, ::1 and ``hosts``.
    Existing files are replaced only with ``force``; otherwise a ConfigError names them.
    """
    if not 1 <= days <= MAX_DAYS:
        raise ConfigError(f"certificate validity must be 1 to {MAX_DAYS} days, not {days}")
    names = subject_alternative_names(hosts)
    pair = CertificatePair(directory / CERT_NAME, directory / KEY_NAME)
    if not force:
        for path in (pair.cert_file, pair.key_file):
            if path.exists():
                raise ConfigError(f"{path} already exists; pass --force to replace it")
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = build_certificate(key, names, days)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    cert_pem = certificate.public_bytes(serialization.Encoding.PEM)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the directory {directory}: {exc}") from exc
    _write_new(pair.key_file, key_pem, 0o600, force=force)
    _write_new(pair.cert_file, cert_pem, 0o644, force=force)
    return pair


def subject_alternative_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    """localhost, this machine's hostname, the loopback addresses and ``hosts``, once each."""
    names: list[x509.GeneralName] = []
    for host in ["localhost", _hostname(), "127.0.0.1", "::1", *hosts]:
        if not host:
            continue
        name = _general_name(host)
        if name not in names:
            names.append(name)
    return names


def build_certificate(
    key: ec.EllipticCurvePrivateKey, names: list[x509.GeneralName], days: int
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, COMMON_NAME)])
    public_key = key.public_key()
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(public_key), critical=False
        )
        .sign(key, hashes.SHA256())
    )


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        # a certificate holds DNS names in their ASCII (IDNA) form
        return x509.DNSName(host.encode("idna").decode("ascii"))
    except UnicodeError as exc:
        raise ConfigError(f"{host!r} is neither an IP address nor a DNS name: {exc}") from None


def _hostname() -> str:
    hostname = socket.gethostname()
    try:
        hostname.encode("idna")
    except UnicodeError:
        return ""  # not expressible as a DNS name: localhost and the addresses still work
    return hostname


def _write_new(path: Path, data: bytes, mode: int, *, force: bool) -> None:
    """Create ``path`` with ``mode`` from the start, so a key is never readable by others."""
    try:
        if force:
            path.unlink(missing_ok=True)  # a replaced file must not keep its old mode
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise ConfigError(f"{path} already exists; pass --force to replace it") from None
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc}") from exc
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
