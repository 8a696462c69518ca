"""TLS on the TCP listeners (ACL.md section 6): disabled, permissive and enforcing ports,
mutual TLS, encrypted keys, Apache's settings and tls.properties, and a broker that
registers with a name server that speaks only TLS."""

from __future__ import annotations

import asyncio
import logging
import ssl
from functools import partial
from pathlib import Path

import anyio
import pytest
import trustme
from cryptography.hazmat.primitives import serialization
from rocketmq_transport_tcp import TcpTransport
from rocketmq_transport_tcp.tls_contexts import server_context

from rocketmq_core.broker.app import Broker
from rocketmq_core.cli import main
from rocketmq_core.client.config import ClientConfig
from rocketmq_core.client.message import Message, SendStatus
from rocketmq_core.client.producer import Producer
from rocketmq_core.errors import ConfigError, RemotingError
from rocketmq_core.namesrv.config import NamesrvConfig
from rocketmq_core.namesrv.server import NameServer
from rocketmq_core.protocol.bodies import TopicConfig
from rocketmq_core.protocol.codes import RequestCode, ResponseCode
from rocketmq_core.protocol.command import RemotingCommand
from rocketmq_core.protocol.constants import PERM_RW
from rocketmq_core.remoting.client import RemotingClient
from rocketmq_core.remoting.transport import ClientAuth, TlsMode, TlsOptions
from rocketmq_core.testing.broker import broker_config
from rocketmq_core.testing.cluster import EmbeddedCluster
from rocketmq_core.testing.namesrv import namesrv_config
from rocketmq_core.testing.transport import ECHO, ConformanceProcessors, serving
from tests.cpp_client import load_cpp_client
from tests.interop.cpp import message, producer

pytestmark = pytest.mark.anyio


class Pki:
    """A test CA, the server's certificate, a client certificate it issued, and one
    from another CA, as PEM files."""

    def __init__(self, folder: Path) -> None:
        authority = trustme.CA()
        self.folder = folder
        self.ca = self._write(authority.cert_pem, "ca.pem")
        server = authority.issue_cert("localhost", "127.0.0.1")
        self.cert = self._write(server.cert_chain_pems[0], "cert.pem")
        self.key = self._write(server.private_key_pem, "key.pem")
        client = authority.issue_cert("client@example.com")
        self.client_cert = self._write(client.cert_chain_pems[0], "client-cert.pem")
        self.client_key = self._write(client.private_key_pem, "client-key.pem")
        stranger_authority = trustme.CA()
        self.stranger_ca = self._write(stranger_authority.cert_pem, "stranger-ca.pem")
        stranger = stranger_authority.issue_cert("stranger@example.com")
        self.stranger_cert = self._write(stranger.cert_chain_pems[0], "stranger-cert.pem")
        self.stranger_key = self._write(stranger.private_key_pem, "stranger-key.pem")

    def _write(self, blob: trustme.Blob, name: str) -> str:
        path = self.folder / name
        blob.write_to_path(str(path))
        return str(path)

    def encrypted_key(self, password: bytes) -> str:
        """The server's key as an encrypted PKCS#8 PEM (``openssl pkcs8 -topk8``)."""
        key = serialization.load_pem_private_key(Path(self.key).read_bytes(), password=None)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(password),
        )
        path = self.folder / "key-encrypted.pem"
        path.write_bytes(pem)
        return str(path)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def listener(pki: Pki, mode: TlsMode, **options) -> TlsOptions:
    return TlsOptions(cert_file=pki.cert, key_file=pki.key, mode=mode, **options)


def trusting(pki: Pki, **options) -> TlsOptions:
    return TlsOptions(ca_file=pki.ca, **options)


async def echo(address: str, tls: TlsOptions | None, body: bytes = b"ping") -> bytes:
    async with RemotingClient(TcpTransport(), tls=tls, connect_timeout=5) as client:
        response = await client.invoke(address, RemotingCommand.request(ECHO, None, body), 5)
    return response.body


async def refused(address: str, tls: TlsOptions | None) -> bool:
    """True when the server closes on the client instead of answering its request."""
    try:
        await echo(address, tls)
    except RemotingError:
        return True
    return False


# --- the listener ------------------------------------------------------------------


async def test_a_permissive_port_serves_plain_and_tls_clients_alike(pki):
    processors = ConformanceProcessors()
    tls = listener(pki, TlsMode.PERMISSIVE)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (server, address):
        assert await echo(address, None, b"plain") == b"plain"
        assert await echo(address, trusting(pki), b"encrypted") == b"encrypted"
        # one of each at once, on the same port
        async with (
            RemotingClient(TcpTransport()) as plain,
            RemotingClient(TcpTransport(), tls=trusting(pki)) as encrypted,
        ):
            for number in range(3):
                for client in (plain, encrypted):
                    body = f"{number}".encode()
                    response = await client.invoke(
                        address, RemotingCommand.request(ECHO, None, body)
                    )
                    assert response.body == body
    assert server.accepted["tcp"] == 4


async def test_a_permissive_port_closes_a_client_that_sends_nothing_or_leaves(pki, monkeypatch):
    from rocketmq_transport_tcp import transport as tcp

    monkeypatch.setattr(tcp, "FIRST_BYTE_TIMEOUT", 0.2)
    processors = ConformanceProcessors()
    tls = listener(pki, TlsMode.PERMISSIVE)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (server, address):
        host, port = address.rsplit(":", 1)
        silent = await anyio.connect_tcp(host, int(port))
        async with silent:
            with anyio.fail_after(5), pytest.raises(anyio.EndOfStream):
                await silent.receive()  # closed without a byte
        gone = await anyio.connect_tcp(host, int(port))
        await gone.aclose()
        assert await echo(address, None) == b"ping"  # the port still serves
    assert server.accepted["tcp"] == 1  # the two were never handed to the server


async def test_test_mode_serves_a_certificate_made_at_start(pki):
    processors = ConformanceProcessors()
    tls = TlsOptions(mode=TlsMode.PERMISSIVE, self_signed=True)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        assert await echo(address, TlsOptions(verify=False)) == b"ping"
        assert await echo(address, None) == b"ping"
        # nobody can verify it
        assert await refused(address, trusting(pki))
        assert await refused(address, TlsOptions())


@pytest.mark.parametrize("mode", [TlsMode.PERMISSIVE, TlsMode.ENFORCING])
async def test_a_renewed_certificate_serves_the_next_handshake(tmp_path, caplog, mode):
    old_authority, new_authority = trustme.CA(), trustme.CA()
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    old_ca, new_ca = str(tmp_path / "old-ca.pem"), str(tmp_path / "new-ca.pem")
    old_authority.cert_pem.write_to_path(old_ca)
    new_authority.cert_pem.write_to_path(new_ca)

    def install(authority: trustme.CA, *, key_too: bool = True) -> None:
        issued = authority.issue_cert("localhost", "127.0.0.1")
        for blob, path in ((issued.cert_chain_pems[0], cert), (issued.private_key_pem, key)):
            if path is key and not key_too:
                continue
            staged = path.with_suffix(".new")
            blob.write_to_path(str(staged))
            staged.replace(path)  # as a deployment tool renews: a new file, renamed over

    install(old_authority)
    tls = TlsOptions(cert_file=str(cert), key_file=str(key), mode=mode)
    processors = ConformanceProcessors()
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        assert await echo(address, TlsOptions(ca_file=old_ca)) == b"ping"
        install(new_authority)
        assert await echo(address, TlsOptions(ca_file=new_ca)) == b"ping"
        assert await refused(address, TlsOptions(ca_file=old_ca))
        # half a renewal: a certificate without its key, which no handshake could use
        with caplog.at_level(logging.ERROR, "rocketmq.remoting"):
            install(old_authority, key_too=False)
            for _ in range(2):
                assert await echo(address, TlsOptions(ca_file=new_ca)) == b"ping"
        failures = [r for r in caplog.records if "cannot be used" in r.getMessage()]
        assert len(failures) == 1 and str(cert) in failures[0].getMessage()
        install(old_authority)  # the pair complete again
        assert await echo(address, TlsOptions(ca_file=old_ca)) == b"ping"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # asyncio's transports serve them
async def test_listen_sockets_hands_over_each_socket_with_the_context_to_serve_it(pki):
    """A permissive port: a plain client's socket comes without a context, a TLS client's
    with the listener's, which the event loop's own TLS layer then serves."""
    seen: list[bool] = []

    class Echo(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport

        def data_received(self, data):
            self.transport.write(data)

    async def serve(client, context):
        seen.append(context is not None)
        loop = asyncio.get_running_loop()
        await loop.connect_accepted_socket(Echo, client, ssl=context)

    async with anyio.create_task_group() as group:
        address = await group.start(
            partial(TcpTransport().listen_sockets, tls=listener(pki, TlsMode.PERMISSIVE)),
            "127.0.0.1",
            0,
            serve,
        )
        host, port = address.rsplit(":", 1)
        async with await anyio.connect_tcp(host, int(port)) as plain:
            await plain.send(b"\x00plain")
            assert await plain.receive() == b"\x00plain"
        context = ssl.create_default_context(cafile=pki.ca)
        async with await anyio.connect_tcp(host, int(port), ssl_context=context) as encrypted:
            await encrypted.send(b"encrypted")
            assert await encrypted.receive() == b"encrypted"
        group.cancel_scope.cancel()
    assert seen == [False, True]


async def test_an_enforcing_port_refuses_a_plain_client(pki):
    processors = ConformanceProcessors()
    tls = listener(pki, TlsMode.ENFORCING)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        assert await refused(address, None)
        assert await echo(address, trusting(pki)) == b"ping"


async def test_a_disabled_port_refuses_a_tls_client(pki):
    processors = ConformanceProcessors()
    async with serving(TcpTransport(), processors.table(), tls=None) as (_server, address):
        assert await refused(address, trusting(pki))
        assert await echo(address, None) == b"ping"
    tls = listener(pki, TlsMode.DISABLED)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        assert await refused(address, trusting(pki))


@pytest.mark.parametrize("mode", [TlsMode.PERMISSIVE, TlsMode.ENFORCING])
async def test_mutual_tls_requires_a_certificate_the_ca_issued(pki, mode):
    processors = ConformanceProcessors()
    tls = listener(pki, mode, ca_file=pki.ca, client_auth=ClientAuth.REQUIRE)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        assert await refused(address, trusting(pki))  # no certificate
        stranger = trusting(pki, cert_file=pki.stranger_cert, key_file=pki.stranger_key)
        assert await refused(address, stranger)
        known = trusting(pki, cert_file=pki.client_cert, key_file=pki.client_key)
        assert await echo(address, known) == b"ping"


@pytest.mark.parametrize("client_auth", [ClientAuth.REQUIRE, ClientAuth.OPTIONAL])
async def test_mutual_tls_never_trusts_the_systems_cas(pki, monkeypatch, client_auth):
    # the stranger's CA stands for a public one: OpenSSL reads SSL_CERT_FILE as the
    # system's CA file, so a context that loads the system's CAs would let it in
    monkeypatch.setenv("SSL_CERT_FILE", pki.stranger_ca)
    processors = ConformanceProcessors()
    tls = listener(pki, TlsMode.ENFORCING, ca_file=pki.ca, client_auth=client_auth)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        stranger = trusting(pki, cert_file=pki.stranger_cert, key_file=pki.stranger_key)
        assert await refused(address, stranger)
        known = trusting(pki, cert_file=pki.client_cert, key_file=pki.client_key)
        assert await echo(address, known) == b"ping"


def test_client_auth_without_a_ca_file_is_an_error(pki):
    config = settings(
        **{
            "tls.server.mode": "enforcing",
            "tls.server.certPath": pki.cert,
            "tls.server.keyPath": pki.key,
            "tls.server.need.client.auth": "require",
            "tls.server.authClient": "true",
        }
    )
    with pytest.raises(ConfigError) as caught:
        config.validate_endpoints()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("tls.server.need.client.auth=require needs tls.server.trustCertPath:")
    # and a listener handed such options by any other path refuses to start
    tls = listener(pki, TlsMode.ENFORCING, client_auth=ClientAuth.OPTIONAL)
    with pytest.raises(ConfigError, match=r"needs the CA file .*tls\.server\.trustCertPath"):
        server_context(tls)


async def test_optional_client_auth_takes_clients_with_or_without_a_certificate(pki):
    processors = ConformanceProcessors()
    tls = listener(pki, TlsMode.ENFORCING, ca_file=pki.ca, client_auth=ClientAuth.OPTIONAL)
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        assert await echo(address, trusting(pki)) == b"ping"
        known = trusting(pki, cert_file=pki.client_cert, key_file=pki.client_key)
        assert await echo(address, known) == b"ping"
        stranger = trusting(pki, cert_file=pki.stranger_cert, key_file=pki.stranger_key)
        assert await refused(address, stranger)


async def test_an_encrypted_key_is_read_with_its_password(pki):
    processors = ConformanceProcessors()
    key = pki.encrypted_key(b"s3cret")
    tls = TlsOptions(cert_file=pki.cert, key_file=key, key_password="s3cret")
    async with serving(TcpTransport(), processors.table(), tls=tls) as (_server, address):
        assert await echo(address, trusting(pki)) == b"ping"
    for password in ("wrong", None):
        wrong = TlsOptions(cert_file=pki.cert, key_file=key, key_password=password)
        with pytest.raises(ConfigError, match="wrong or missing key password") as caught:
            await TcpTransport().listen("127.0.0.1", 0, processors.table, tls=wrong)
        assert key in str(caught.value)


# --- the settings ------------------------------------------------------------------


def settings(**values: str) -> NamesrvConfig:
    config = NamesrvConfig(tls_config_file="")
    config.update(values, source="namesrv.conf")
    return config


def test_the_default_is_plain_tcp():
    config = NamesrvConfig()
    config.validate_endpoints()
    assert config.tls_for("tcp") is None
    assert config.client_tls() is None


def test_apache_keys_make_the_listener_and_client_options(pki):
    config = settings(
        **{
            "tls.server.mode": "Permissive",
            "tls.server.certPath": pki.cert,
            "tls.server.keyPath": pki.key,
            "tls.server.need.client.auth": "REQUIRE",
            "tls.server.authClient": "true",
            "tls.server.trustCertPath": pki.ca,
            "tls.enable": "true",
            "tls.client.certPath": pki.client_cert,
            "tls.client.keyPath": pki.client_key,
            "tls.client.authServer": "true",
            "tls.client.trustCertPath": pki.ca,
        }
    )
    config.validate_endpoints()
    assert config.tls_for("tcp") == TlsOptions(
        cert_file=pki.cert,
        key_file=pki.key,
        ca_file=pki.ca,
        mode=TlsMode.PERMISSIVE,
        client_auth=ClientAuth.REQUIRE,
        self_signed=True,
    )
    assert config.client_tls() == TlsOptions(
        cert_file=pki.client_cert,
        key_file=pki.client_key,
        ca_file=pki.ca,
        verify=True,
        check_hostname=False,
    )
    # QUIC keeps its own: the certificate alone
    assert config.tls_for("quic") == TlsOptions(cert_file=pki.cert, key_file=pki.key)


def test_own_connections_use_tls_when_the_mode_is_enforcing_unless_told():
    assert settings(**{"tls.server.mode": "enforcing"}).client_tls() == TlsOptions(
        verify=False, check_hostname=False
    )
    assert settings(**{"tls.server.mode": "permissive"}).client_tls() is None
    told = settings(**{"tls.server.mode": "enforcing", "tls.enable": "false"})
    assert told.client_tls() is None


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "tls.server.need.client.auth",
            "requier",
            "tls.server.need.client.auth must be none, optional or require, not 'requier'",
        ),
        ("tls.enable", "yes", "tls.enable must be true, false or empty"),
        ("tls.test.mode.enable", "maybe", "tls.test.mode.enable must be true or false"),
        (
            "tls.server.need.client.auth",
            "require",
            "tls.server.need.client.auth=require needs tls.server.authClient=true",
        ),
    ],
)
def test_a_bad_value_names_the_key_and_what_it_may_be(key, value, message):
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        config = settings(**{"tls.server.mode": "permissive", key: value})
        config.validate_endpoints()


def test_a_missing_file_is_named(pki, tmp_path):
    missing = str(tmp_path / "nowhere" / "cert.pem")
    config = settings(
        **{
            "tls.server.mode": "enforcing",
            "tls.server.certPath": missing,
            "tls.server.keyPath": pki.key,
        }
    )
    with pytest.raises(ConfigError, match=f"TLS certificate file {missing}: No such file"):
        config.validate_endpoints()
    config = settings(**{"tls.server.mode": "permissive", "tls.config.file": missing})
    with pytest.raises(ConfigError, match=f"cannot read tls.config.file {missing}"):
        config.validate_endpoints()


def test_no_certificate_outside_test_mode_is_an_error():
    config = settings(**{"tls.server.mode": "enforcing", "tls.test.mode.enable": "false"})
    with pytest.raises(
        ConfigError, match=r"tls\.server\.mode=enforcing needs tls\.server\.certPath"
    ):
        config.validate_endpoints()


def test_an_unknown_mode_is_permissive_with_a_warning(caplog):
    config = settings(**{"tls.server.mode": "enforcng"})
    with caplog.at_level(logging.WARNING, logger="rocketmq.remoting"):
        config.validate_endpoints()
    assert "tls.server.mode=enforcng is not disabled, permissive or enforcing" in caplog.text
    assert config.tls_for("tcp").mode is TlsMode.PERMISSIVE


def test_tls_properties_override_all_but_the_mode_and_tls_enable(pki, tmp_path):
    file = tmp_path / "tls.properties"
    file.write_text(
        "tls.server.mode=disabled\n"
        "tls.enable=false\n"
        "tls.test.mode.enable=false\n"
        f"tls.server.certPath={pki.cert}\n"
        f"tls.server.keyPath={pki.key}\n"
        "tls.client.authServer=true\n"
        f"tls.client.trustCertPath={pki.ca}\n"
    )
    config = settings(
        **{
            "tls.server.mode": "enforcing",
            "tls.config.file": str(file),
            "tls.server.certPath": "/not/read.pem",
            "tls.server.keyPath": "/not/read.pem",
        }
    )
    config.validate_endpoints()
    served = config.tls_for("tcp")
    assert (served.mode, served.cert_file, served.self_signed) == (
        TlsMode.ENFORCING,
        pki.cert,
        False,
    )
    assert config.client_tls() == TlsOptions(ca_file=pki.ca, verify=True, check_hostname=False)
    # a bad value in the file names the file
    file.write_text("tls.server.authClient=perhaps\n")
    with pytest.raises(ConfigError, match=f"{file}: tls.server.authClient must be true or false"):
        config.validate_endpoints()


# --- servers -----------------------------------------------------------------------


async def test_a_broker_registers_with_a_tls_only_name_server(pki, tmp_path, plugin_host):
    namesrv_settings = {
        "tls_server_mode": "enforcing",
        "tls_server_cert_path": pki.cert,
        "tls_server_key_path": pki.key,
        "tls_config_file": "",
    }
    ns_config = namesrv_config(tmp_path / "ns", **namesrv_settings)
    async with NameServer.serving(ns_config, host=plugin_host) as namesrv:
        config = broker_config(
            tmp_path / "broker",
            namesrv.address,
            tls_config_file="",
            tls_server_mode="permissive",
            tls_server_cert_path=pki.cert,
            tls_server_key_path=pki.key,
            tls_enable="true",
            tls_client_auth_server=True,
            tls_client_trust_cert_path=pki.ca,
        )
        async with Broker.serving(config, host=plugin_host) as broker:
            broker.topics.update(TopicConfig("Secured", 2, 2, int(PERM_RW)))
            with anyio.fail_after(10):
                while namesrv.routes.route("Secured") is None:
                    await anyio.sleep(0.01)
            # the SDK over TLS to both; a plain client reaches the broker, not the name server
            tls_client = ClientConfig(namesrv_addr=namesrv.address, tls=trusting(pki))
            async with Producer("PG-tls", config=tls_client) as producer:
                result = await producer.send(Message("Secured", b"over TLS"))
            assert result.status is SendStatus.SEND_OK
            assert await refused(namesrv.address, None)
            async with RemotingClient(TcpTransport()) as plain:
                asked = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
                answer = await plain.invoke(broker.address, asked, 5)
            assert answer.code == ResponseCode.SUCCESS


# --- clients outside the event loop: the C++ client and the CLI ----------------------


@pytest.fixture(scope="module")
def permissive_cluster(tmp_path_factory, pki):
    """A name server and a broker that serve plain and TLS clients on every TCP port."""
    tls = {
        "tls_config_file": "",
        "tls_server_mode": "permissive",
        "tls_server_cert_path": pki.cert,
        "tls_server_key_path": pki.key,
    }
    with EmbeddedCluster(
        tmp_path_factory.mktemp("cluster"), namesrv_overrides=tls, **tls
    ) as running:
        yield running


def test_the_cpp_client_sends_plain_to_a_permissive_broker(permissive_cluster):
    cpp = load_cpp_client()
    permissive_cluster.create_topic("Mixed")
    with producer(cpp, permissive_cluster.namesrv_address, "PID-tls-plain") as sender:
        results = [sender.send_sync(message(cpp, "Mixed", n)) for n in range(5)]
    assert [result.status for result in results] == [cpp.SendStatus.OK] * 5


def test_the_cli_reaches_the_cluster_over_tls(permissive_cluster, pki, capsys):
    address = permissive_cluster.namesrv_address
    assert main(["cluster", "list", "-n", address, "--tls", "--tls-ca", pki.ca]) == 0
    assert "broker-a" in capsys.readouterr().out
    # the server's certificate must be trusted
    assert main(["cluster", "list", "-n", address, "--tls"]) == 1
    assert "cannot connect to" in capsys.readouterr().err
