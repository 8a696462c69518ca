"""One Spark session and one embedded cluster for the whole test run (SPARK.md §4.13:
starting Spark costs seconds, a query on a warm session a fraction of one)."""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

from rocketmq_core.testing.cluster import EmbeddedCluster
from tests.missing import missing

_names = itertools.count()


def stale_installed_files() -> list[str]:
    """The plugin's files that differ from, or are missing in, the installed wheel (which
    Spark's workers and these tests import): empty for an editable install."""
    try:
        installed = distribution("rocketmq-spark").files or []
    except PackageNotFoundError:
        return []
    tree = Path(__file__).parents[1]
    copies = {str(file): file for file in installed if file.suffix in (".py", ".pth")}
    if not any(name.startswith("rocketmq_spark/") for name in copies):
        return []  # editable: the tree itself is imported
    ours = [tree / "pyspark_rocketmq.py", tree / "rocketmq_spark_startup.py"]
    ours += [tree / "rocketmq_spark_startup.pth", *(tree / "rocketmq_spark").glob("*.py")]
    stale = []
    for path in ours:
        copy = copies.get(path.relative_to(tree).as_posix())
        if copy is None or Path(copy.locate()).read_bytes() != path.read_bytes():
            stale.append(path.relative_to(tree).as_posix())
    return stale


@pytest.fixture(scope="session", autouse=True)
def installed_plugin_is_current():
    stale = stale_installed_files()
    if stale:
        pytest.fail(
            f"plugins/spark changed since it was installed ({', '.join(stale)}): the tests "
            "and Spark's workers would run the old code; pip install ./plugins/spark again"
        )


@pytest.fixture(scope="session")
def spark():
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        missing(f"pyspark (a dependency of plugins/spark) cannot load: {exc}")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing("Spark needs Java 17+: no java on PATH and no JAVA_HOME")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers run this interpreter, not PATH's
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2,3]")  # 2 cores; a failed task gets 2 retries
        .appName("rocketmq-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .config("spark.sql.streaming.stopTimeout", "10s")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    # check-backs come quickly, so orphaned halves are decided within the test
    with EmbeddedCluster(
        tmp_path_factory.mktemp("spark-cluster"),
        transaction_check_interval=1000,
        transaction_time_out=1000,
    ) as running:
        yield running


@pytest.fixture
def topic(cluster):
    """A fresh topic of 4 queues for one test."""
    name = f"SparkT{next(_names)}"
    cluster.create_topic(name, queues=4)
    return name


@pytest.fixture
def new_topic(cluster):
    def make(queues: int = 4) -> str:
        name = f"SparkT{next(_names)}"
        cluster.create_topic(name, queues=queues)
        return name

    return make


@pytest.fixture(scope="module", autouse=True)
def no_clients_left_behind():
    """The clients the driver's side keeps (this process's: commits, planning) are shut
    down with each module, so that their loop thread and sockets do not outlive Spark's
    tests in this worker, where other tests count threads and descriptors."""
    yield
    from rocketmq_spark import runtime

    runtime.shutdown_all()
