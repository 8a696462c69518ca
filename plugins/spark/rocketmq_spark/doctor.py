"""``rocketmq spark check``: whether Spark's Python workers will find the ``rocketmq``
data source, and, given a name server and a topic, a real batch read through Spark.

Each check prints one line, ``ok`` or ``FAIL`` with what to do; the exit status is 1
when one failed. It catches the setups SPARK.md §4 lists: no Java, pyspark missing,
the plugin installed in a way PySpark's module scan cannot see. A ``note`` line tells
of a setup that works but slower (no startup hook), and does not change the status.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pkgutil
import shutil
import subprocess
import sys
import time

from rocketmq_core.plugins import PluginHost


class SparkCommand:
    help = "check that PySpark finds the rocketmq data source (and can read a topic)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="spark_action", metavar="ACTION")
        check = actions.add_parser("check", help=self.help)
        check.add_argument("-n", "--namesrv-addr", help="read --topic through this name server")
        check.add_argument("--topic", help="count this topic's messages with a Spark batch read")

    def run(self, args: argparse.Namespace, host: PluginHost) -> int:
        if args.spark_action != "check":
            print("usage: rocketmq spark check [-n ADDR --topic TOPIC]", file=sys.stderr)
            return 2
        pyspark = _pyspark()
        checks = [_java(), pyspark, _discoverable()]
        passed = all(ok for ok, _ in checks)
        for ok, line in checks:
            print(f"{'ok  ' if ok else 'FAIL'} {line}")
        if pyspark[0]:  # pyspark 4 is there: how Spark's processes will import it
            hooked, line = _compiled_pyspark()
            print(f"{'ok  ' if hooked else 'note'} {line}")
        if passed and args.topic:
            ok, line = _read(args.namesrv_addr or os.environ.get("NAMESRV_ADDR", ""), args.topic)
            print(f"{'ok  ' if ok else 'FAIL'} {line}")
            passed = ok
        return 0 if passed else 1


def _java() -> tuple[bool, str]:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        return False, "java: not found; Spark 4 needs Java 17+ on PATH or in JAVA_HOME"
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    first = (done.stderr or done.stdout).splitlines()[0] if (done.stderr or done.stdout) else "?"
    return done.returncode == 0, f"java: {first.strip()} ({java})"


def _pyspark() -> tuple[bool, str]:
    if importlib.util.find_spec("pyspark") is None:
        return False, "pyspark: not installed; pip install rocketmq-spark installs it"
    import pyspark

    major = int(pyspark.__version__.split(".")[0])
    return major >= 4, f"pyspark {pyspark.__version__} (the data source API needs 4.x)"


def _discoverable() -> tuple[bool, str]:
    # Spark's lookup worker scans sys.path with pkgutil, which import hooks escape
    found = [m for m in pkgutil.iter_modules() if m.name == "pyspark_rocketmq"]
    if not found:
        return False, (
            "pyspark_rocketmq is not on sys.path, so format('rocketmq') fails with "
            "DATA_SOURCE_NOT_FOUND; install normally, or editable with "
            "--config-settings editable_mode=compat, or call rocketmq_spark.register(spark)"
        )
    where = getattr(found[0].module_finder, "path", found[0].module_finder)  # a zip has none
    return True, f"format('rocketmq'): pyspark_rocketmq found in {where}"


def _compiled_pyspark() -> tuple[bool, str]:
    """Whether a Python process started as Spark starts one (its pyspark.zip first on the
    path) imports the installed pyspark: rocketmq_spark_startup.pth sees to it."""
    import pyspark

    package = os.path.dirname(pyspark.__file__)
    spark_zip = os.path.join(package, "python", "lib", "pyspark.zip")
    if not os.path.isfile(spark_zip):
        return True, "pyspark imports: no pyspark.zip in this pyspark, nothing to speed up"
    done = subprocess.run(
        [sys.executable, "-c", "import pyspark; print(pyspark.__file__)"],
        env={**os.environ, "PYTHONPATH": spark_zip},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.stdout.strip() == pyspark.__file__:
        return True, "pyspark imports: Spark's Python processes load the compiled package"
    return False, (
        "pyspark imports: Spark's Python processes compile pyspark.zip afresh (~0.5 s each, "
        "and a streaming query starts one); the startup hook that avoids it comes with a "
        "wheel install of rocketmq-spark, not an editable one"
    )


def _read(namesrv: str, topic: str) -> tuple[bool, str]:
    if not namesrv:
        return False, "read: give -n host:9876 (or set NAMESRV_ADDR) with --topic"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    started = time.perf_counter()
    spark = (
        SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        count = (
            spark.read.format("rocketmq")
            .option("nameServer", namesrv)
            .option("subscribe", topic)
            .load()
            .count()
        )
    except Exception as exc:
        return False, f"read {topic}: {str(exc).splitlines()[0]}"
    finally:
        spark.stop()
    seconds = time.perf_counter() - started
    return True, f"read {topic}: {count} messages in {seconds:.1f} s, Spark's start included"
