"""Every code block of README.md and plugins/*/README.md runs as written.

A ```python block is a program a reader pastes and runs against `rocketmq standalone`
(127.0.0.1:9876). Here each runs in a subprocess of its own, HOME and cwd in a temp
dir, against a real embedded cluster whose name-server address replaces 127.0.0.1:9876.
An HTML comment on the line before a block says when it needs another runner:

    <!-- example: pytest -->   a test module: run by pytest, with the rocketmq plugin
    <!-- example: spark -->    a Spark program: all of them run in one process (Spark
                               takes seconds to start), after the other blocks
    <!-- example: quic -->     needs `rocketmq certs create --dir certs` and a cluster
                               that serves QUIC beside TCP

A ```toml block must parse, and the entry points it shows must be installed ones.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from rocketmq_core.cli import main as rocketmq
from rocketmq_core.client import sync
from rocketmq_core.client.message import Message
from rocketmq_core.testing.cluster import EmbeddedCluster, quic_listener_settings
from tests.missing import missing

ROOT = Path(__file__).parents[1]
READMES = [ROOT / "README.md", *sorted(ROOT.glob("plugins/*/README.md"))]
README_NAMESRV = "127.0.0.1:9876"  # what the READMEs tell readers to connect to
TOPICS = ("Orders", "OrderCopies", "Archive")  # the topics the READMEs use
RUNNERS = ("python", "pytest", "spark", "quic")
# seconds per block: a consumer block that waits for messages gives up later than this,
# so one that never gets its messages fails here instead of exiting 0
BLOCK_TIMEOUT = 20
# a pytest block starts pytest and an embedded cluster and restarts its broker (9-14 s
# here, over 20 on a busy CI machine); it asserts what it needs itself, waits for no
# consumer, so only a hang is caught by this limit
PYTEST_BLOCK_TIMEOUT = 90
SPARK_TIMEOUT = 180

MARKER = re.compile(r"<!--\s*example:\s*(\S+)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    readme: str  # relative to the repository
    line: int  # of the opening fence
    language: str
    runner: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.readme}:{self.line}"

    @property
    def file_stem(self) -> str:
        return re.sub(r"\W", "_", self.name)


def read_blocks(readme: Path) -> list[Block]:
    """The fenced blocks of a README, each with the runner its marker names."""
    lines = readme.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        end = next((at for at in range(index + 1, len(lines)) if lines[at].startswith("```")), None)
        assert end is not None, f"{readme}:{index + 1}: a code block is never closed"
        previous = next((text for text in reversed(lines[:index]) if text.strip()), "")
        marker = MARKER.search(previous)
        blocks.append(
            Block(
                readme=readme.relative_to(ROOT).as_posix(),
                line=index + 1,
                language=fence.group(1),
                runner=marker.group(1) if marker else "python",
                code="\n".join(lines[index + 1 : end]) + "\n",
            )
        )
        index = end + 1
    return blocks


BLOCKS = [block for readme in READMES for block in read_blocks(readme)]
PYTHON = [block for block in BLOCKS if block.language == "python"]
TOML = [block for block in BLOCKS if block.language == "toml"]


def run(command: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str | None:
    """Run ``command``; None when it exits 0 in time, else what to show in the assertion.
    It gets a process group of its own, so a timeout also ends what it started (a JVM)."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return f"did not exit within {timeout} s:\n{output[-6000:]}"
    if process.returncode != 0:
        return f"exit {process.returncode}:\n{output[-6000:]}"
    return None


def reader_env(home: Path) -> dict[str, str]:
    """The environment of a reader's shell: ours, with HOME in the test's temp dir."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    env["HOME"] = str(home)
    env.pop("NAMESRV_ADDR", None)
    return env


def pasted(block: Block, namesrv: str, folder: Path) -> Path:
    """The block saved in ``folder`` as a reader would save it, pointed at ``namesrv``."""
    folder.mkdir(exist_ok=True)
    prefix = "test_" if block.runner == "pytest" else ""
    path = folder / f"{prefix}{block.file_stem}.py"
    path.write_text(block.code.replace(README_NAMESRV, namesrv))
    return path


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster for every block. Orders holds a message tagged new and one tagged
    paid, as after a reader ran the producer blocks, so that a consumer block gets
    messages whichever blocks ran before it."""
    with EmbeddedCluster(tmp_path_factory.mktemp("cluster"), store="memory") as running:
        for topic in TOPICS:
            running.create_topic(topic)
        with sync.Producer("PG-readme-seed", running.namesrv_address) as producer:
            producer.send(Message("Orders", b"hello", tags="new", keys="order-1"))
            producer.send(Message("Orders", b"paid", tags="paid", keys="order-1"))
        yield running


def test_the_readmes_have_blocks_and_known_runners():
    assert len(PYTHON) >= 10, [block.name for block in PYTHON]
    assert {block.readme for block in PYTHON} >= {"README.md", "plugins/spark/README.md"}
    for block in PYTHON:
        assert block.runner in RUNNERS, f"{block.name}: unknown example runner {block.runner!r}"


@pytest.mark.parametrize(
    "block", [b for b in PYTHON if b.runner != "spark"], ids=lambda block: block.name
)
def test_python_block_runs_as_written(block, cluster, tmp_path):
    namesrv = cluster.namesrv_address
    with ExitStack() as stack:
        if block.runner == "quic":
            namesrv = start_quic_cluster(stack, tmp_path)
        path = pasted(block, namesrv, tmp_path)
        if block.runner == "pytest":
            # hypothesis and pytest-benchmark only slow the start (by seconds) of a test
            # that uses neither
            quiet = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"]
            command = [sys.executable, "-m", "pytest", "-q", *quiet, str(path)]
        else:
            command = [sys.executable, str(path)]
        limit = PYTEST_BLOCK_TIMEOUT if block.runner == "pytest" else BLOCK_TIMEOUT
        failure = run(command, tmp_path, reader_env(tmp_path), limit)
    assert failure is None, f"{block.name} ({block.runner}) {failure}"


def start_quic_cluster(stack: ExitStack, cwd: Path) -> str:
    """`rocketmq certs create --dir certs` in the reader's directory (the block names
    certs/cert.pem from there) and a cluster serving QUIC with that pair; its QUIC
    name-server endpoint, as ``host:port``."""
    certs = cwd / "certs"
    assert rocketmq(["certs", "create", "--dir", str(certs)]) == 0
    settings = quic_listener_settings(str(certs / "cert.pem"), str(certs / "key.pem"))
    running = stack.enter_context(
        EmbeddedCluster(
            cwd / "quic-cluster", store="memory", namesrv_overrides=settings, **settings
        )
    )
    running.create_topic("Orders")
    return running.namesrv_endpoint("quic").removeprefix("quic://")


# runs the Spark blocks one after the other on one Spark session (getOrCreate)
IN_TURN = """
import os, runpy, sys
for path in sys.argv[1:]:
    os.chdir(os.path.dirname(path))
    print("===", path, flush=True)
    runpy.run_path(path, run_name="__main__")
"""


def test_spark_blocks_run_as_written(cluster, tmp_path):
    blocks = [block for block in PYTHON if block.runner == "spark"]
    assert blocks, "no <!-- example: spark --> block found"
    if importlib.util.find_spec("pyspark") is None:
        missing("pyspark (installed by plugins/spark) is needed to run the Spark blocks")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        missing("Spark needs Java 17+: no java on PATH and no JAVA_HOME")
    namesrv = cluster.namesrv_address
    paths = [pasted(block, namesrv, tmp_path / block.file_stem) for block in blocks]
    env = reader_env(tmp_path)
    env["PYSPARK_PYTHON"] = sys.executable  # workers run this interpreter, not PATH's
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # a smaller, faster driver than Spark's defaults; the blocks themselves stay plain
    options = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    submit = ["--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=1"]
    env["PYSPARK_SUBMIT_ARGS"] = shlex.join(
        [*submit, "--driver-java-options", options, "pyspark-shell"]
    )
    command = [sys.executable, "-c", IN_TURN, *map(str, paths)]
    failure = run(command, tmp_path, env, SPARK_TIMEOUT)
    names = ", ".join(block.name for block in blocks)
    assert failure is None, f"Spark blocks {names}: {failure}"


@pytest.mark.parametrize("block", TOML, ids=lambda block: block.name)
def test_toml_block_parses_and_names_installed_entry_points(block):
    document = tomllib.loads(block.code)
    shown = document.get("project", {}).get("entry-points", {}).get("rocketmq", {})
    installed = {point.name: point.value for point in entry_points(group="rocketmq")}
    for name, value in shown.items():
        assert installed.get(name) == value, f"{block.name}: entry point {name} = {value!r}"
