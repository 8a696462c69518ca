"""``rocketmq spark check``: what it reports about this installation."""

from __future__ import annotations

import subprocess
import sys


def test_spark_check_finds_java_pyspark_and_the_data_source():
    done = subprocess.run(
        [sys.executable, "-m", "rocketmq_core.cli", "spark", "check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    assert [line.split()[0] for line in lines] == ["ok", "ok", "ok", "ok"]
    assert "pyspark_rocketmq found in" in lines[2]
    # the installed wheel's startup hook is active
    assert "Spark's Python processes load the compiled package" in lines[3]


def test_spark_check_says_what_to_do_without_a_name_server(monkeypatch):
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    done = subprocess.run(
        [sys.executable, "-m", "rocketmq_core.cli", "spark", "check", "--topic", "T"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "FAIL read: give -n host:9876" in done.stdout


def test_spark_check_notes_a_pyspark_compiled_at_every_start(monkeypatch, capsys):
    """As in an editable install, where no startup hook drops Spark's pyspark.zip: the
    check still passes, and says what the setup costs and what avoids it."""
    import argparse

    from rocketmq_spark import doctor

    real_run = subprocess.run

    def from_the_zip(command, **kwargs):
        if command[1:3] == ["-c", "import pyspark; print(pyspark.__file__)"]:
            return subprocess.CompletedProcess(command, 0, "/x/pyspark.zip/pyspark/__init__.py")
        return real_run(command, **kwargs)

    monkeypatch.setattr(doctor.subprocess, "run", from_the_zip)
    status = doctor.SparkCommand().run(argparse.Namespace(spark_action="check", topic=None), None)
    lines = capsys.readouterr().out.splitlines()
    assert status == 0
    assert lines[3].startswith("note pyspark imports: Spark's Python processes compile")
    assert "wheel install of rocketmq-spark" in lines[3]
