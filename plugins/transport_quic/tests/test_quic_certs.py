"""`rocketmq certs create` writes a self-signed pair that QUIC and TCP TLS serve and trust."""

from __future__ import annotations

import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from rocketmq_transport_quic import QuicTransport
from rocketmq_transport_quic.certs import COMMON_NAME, write_self_signed
from rocketmq_transport_tcp import TcpTransport

from rocketmq_core.cli import main
from rocketmq_core.errors import ConfigError, RemotingConnectError
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.transport import TlsOptions
from rocketmq_core.testing.transport import ECHO, ConformanceProcessors, serving


@pytest.fixture
def rocketmq(capsys):
    """``rocketmq ARGS`` in-process: (exit code, stdout, stderr)."""

    def invoke(*args: str):
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return invoke


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """cert.pem and key.pem as `rocketmq certs create --host 10.1.2.3` writes them."""
    folder = tmp_path_factory.mktemp("certs")
    assert main(["certs", "create", "--dir", str(folder), "--host", "10.1.2.3"]) == 0
    return str(folder / "cert.pem"), str(folder / "key.pem")


def load_certificate(path) -> x509.Certificate:
    with open(path, "rb") as file:
        return x509.load_pem_x509_certificate(file.read())


def test_create_writes_the_pair_and_says_how_to_use_it(rocketmq, tmp_path):
    folder = tmp_path / "new" / "certs"
    code, out, err = rocketmq("certs", "create", "--dir", str(folder))
    assert (code, err) == (0, "")
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    assert f"certificate: {cert_file.resolve()}" in out
    assert f"private key: {key_file.resolve()}" in out
    assert f"tls.server.certPath={cert_file.resolve()}" in out
    assert f"tls.server.keyPath={key_file.resolve()}" in out
    assert f'TlsOptions(ca_file="{cert_file.resolve()}")' in out
    assert "development only" in out
    # the key is never readable by anyone but its owner, and is PKCS8 without a password
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key_pem = key_file.read_bytes()
    assert key_pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    key = load_pem_private_key(key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.curve.name == "secp256r1"
    certificate = load_certificate(cert_file)
    assert certificate.public_key() == key.public_key()


def test_the_certificate_is_its_own_ca_for_the_local_names(pair):
    certificate = load_certificate(pair[0])
    assert certificate.issuer == certificate.subject
    assert certificate.subject.rfc4514_string() == f"CN={COMMON_NAME}"
    extensions = certificate.extensions
    assert extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_cert_sign
    extended = extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(extended) == {
        x509.ExtendedKeyUsageOID.SERVER_AUTH,
        x509.ExtendedKeyUsageOID.CLIENT_AUTH,
    }
    subject_key = extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    authority_key = extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert authority_key.key_identifier == subject_key.digest
    names = extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert set(names.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
        ipaddress.ip_address("10.1.2.3"),  # the --host
    }
    lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    assert 365 * 86400 <= lifetime.total_seconds() <= 365 * 86400 + 120


def test_an_existing_pair_is_replaced_only_with_force(rocketmq, tmp_path):
    assert rocketmq("certs", "create", "--dir", str(tmp_path))[0] == 0
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    before = cert_file.read_bytes(), key_file.read_bytes()
    code, out, err = rocketmq("certs", "create", "--dir", str(tmp_path))
    assert (code, out) == (2, "")
    assert err == f"rocketmq certs: error: {cert_file} already exists; pass --force to replace it\n"
    assert (cert_file.read_bytes(), key_file.read_bytes()) == before
    # a key alone blocks too: nothing is half-written
    cert_file.unlink()
    code, _out, err = rocketmq("certs", "create", "--dir", str(tmp_path))
    assert code == 2 and f"{key_file} already exists" in err
    assert not cert_file.exists()
    key_file.chmod(0o644)
    code, out, err = rocketmq("certs", "create", "--dir", str(tmp_path), "--force", "--days", "30")
    assert (code, err) == (0, "")
    assert key_file.read_bytes() != before[1]
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600  # not the replaced file's mode
    certificate = load_certificate(cert_file)
    lifetime = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    assert round(lifetime.total_seconds() / 86400) == 30


@pytest.mark.parametrize("days", ["0", "3651", "-5"])
def test_days_out_of_range_is_a_clean_error(rocketmq, tmp_path, days):
    code, out, err = rocketmq("certs", "create", "--dir", str(tmp_path), "--days", days)
    assert (code, out) == (2, "")
    assert (
        err == f"rocketmq certs: error: certificate validity must be 1 to 3650 days, not {days}\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_without_an_action_prints_the_usage(rocketmq):
    code, out, err = rocketmq("certs")
    assert (code, out) == (2, "")
    assert err.startswith("usage: rocketmq certs create")


def test_registered_as_a_cli_command_of_the_plugin(plugin_host):
    info = plugin_host.info("transport_quic")
    assert info.registered == {"transport": ["quic"], "CLI command": ["certs"]}


def test_a_name_that_is_neither_ip_nor_dns_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="neither an IP address nor a DNS name"):
        write_self_signed(tmp_path, ["a" * 64 + ".example"])
    assert list(tmp_path.iterdir()) == []


async def round_trip(transport, pair, **client_tls):
    cert_file, key_file = pair
    processors = ConformanceProcessors()
    server_tls = TlsOptions(cert_file=cert_file, key_file=key_file)
    async with serving(transport, processors.table(), tls=server_tls) as (_server, address):
        for server_hostname in (None, "localhost"):
            trusted = TlsOptions(ca_file=cert_file, server_hostname=server_hostname)
            async with RemotingClient(transport, tls=trusted) as client:
                request = RemotingCommand.request(ECHO, None, b"secret")
                response = await client.invoke(address, request, timeout=5)
                assert response.body == b"secret"
        # without the CA the handshake fails, and says so as a connect error
        async with RemotingClient(transport, tls=TlsOptions()) as client:
            with pytest.raises(RemotingConnectError, match="cannot connect to"):
                await client.invoke(address, RemotingCommand.request(ECHO), timeout=2)


@pytest.mark.anyio
async def test_the_pair_serves_and_is_trusted_over_quic(pair):
    await round_trip(QuicTransport(), pair)


@pytest.mark.anyio
async def test_the_pair_serves_and_is_trusted_over_tcp_tls(pair):
    await round_trip(TcpTransport(), pair)
