"""pytest plugin of rocketmq-core (entry point ``pytest11``): shared fixtures.

Fixtures:
- ``golden_frames``: every golden frame (captured C++ client requests and reference frames).
- ``plugin_host``: the installed plugins, loaded as the CLI loads them.
- ``rocketmq_cluster``: an embedded name server and broker for a test (marker ``rocketmq``).
- ``tls_files``: (CA, certificate, key) PEM paths for localhost and 127.0.0.1 (trustme).
"""

from __future__ import annotations

import pytest

from .golden import GoldenFrame, all_frames


@pytest.fixture(scope="session")
def golden_frames() -> list[GoldenFrame]:
    return all_frames()


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory) -> tuple[str, str, str]:
    """A test CA and a certificate it issued for localhost and 127.0.0.1, as PEM files."""
    import trustme  # a test dependency

    authority = trustme.CA()
    certificate = authority.issue_cert("localhost", "127.0.0.1")
    folder = tmp_path_factory.mktemp("tls")
    ca_file, cert_file, key_file = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    authority.cert_pem.write_to_path(str(ca_file))
    certificate.cert_chain_pems[0].write_to_path(str(cert_file))
    certificate.private_key_pem.write_to_path(str(key_file))
    return str(ca_file), str(cert_file), str(key_file)


@pytest.fixture(scope="session")
def plugin_host():
    from ..plugins import load_plugins

    return load_plugins(blocked=())


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "rocketmq(store='memory', **broker_settings): how the rocketmq_cluster fixture"
        " configures its broker (store='mmap' for the CommitLog on disk)",
    )


@pytest.fixture
def rocketmq_cluster(request, tmp_path):
    """A name server and a broker on free ports, serving from a thread of their own.

    The broker keeps messages in memory unless the test is marked
    ``@pytest.mark.rocketmq(store="mmap")``; other keyword arguments of the marker set
    broker settings (``auto_create_topic_enable=False``, ...). Works from sync tests and
    from async tests on any event loop: clients reach it over TCP.

        def test_orders(rocketmq_cluster):
            rocketmq_cluster.create_topic("Orders")
            with Producer("PG", rocketmq_cluster.namesrv_address) as producer: ...
    """
    from .cluster import EmbeddedCluster

    marker = request.node.get_closest_marker("rocketmq")
    settings = {"store": "memory", **(marker.kwargs if marker else {})}
    with EmbeddedCluster(tmp_path / "rocketmq", **settings) as cluster:
        yield cluster
