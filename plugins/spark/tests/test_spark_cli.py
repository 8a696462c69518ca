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
    assert [line.split()[0] for line in lines] == ["ok", "ok", "ok"]
    assert "pyspark_rocketmq found in" in lines[2]


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
