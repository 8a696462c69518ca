"""The startup hook (rocketmq_spark_startup.pth): Spark's Python processes import the
installed, compiled pyspark instead of Spark's own uncompiled pyspark.zip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import rocketmq_spark_startup


def fake_pyspark(site: Path) -> str:
    """A pyspark package with its zip inside, as pip installs it; the zip's path."""
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    (lib / "pyspark.zip").write_bytes(b"")
    return str(lib / "pyspark.zip")


def test_the_zip_of_the_installed_package_leaves_the_path(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    zip_path = fake_pyspark(site)
    monkeypatch.setattr(sys, "path", [zip_path, "/elsewhere", str(site)])
    rocketmq_spark_startup.prefer_compiled_pyspark()
    assert sys.path == ["/elsewhere", str(site)]


@pytest.mark.parametrize("case", ["package not on the path", "a Spark distribution's zip"])
def test_any_other_zip_stays(tmp_path, monkeypatch, case):
    site = tmp_path / "site-packages"
    zip_path = fake_pyspark(site)
    if case == "package not on the path":
        path = [zip_path, "/elsewhere"]
    else:  # $SPARK_HOME/python/lib/pyspark.zip of a downloaded Spark: no package beside it
        spark_home = tmp_path / "spark-4.3.0-bin-hadoop3"
        (spark_home / "python" / "lib").mkdir(parents=True)
        zip_path = str(spark_home / "python" / "lib" / "pyspark.zip")
        path = [zip_path, str(tmp_path)]
    monkeypatch.setattr(sys, "path", list(path))
    rocketmq_spark_startup.prefer_compiled_pyspark()
    assert sys.path == path


def test_a_python_process_started_as_spark_starts_it_imports_the_installed_pyspark():
    """What the installed distribution does: the .pth runs the hook at startup."""
    try:
        import pyspark
    except ImportError as exc:
        from tests.missing import missing

        missing(f"pyspark (a dependency of plugins/spark) cannot load: {exc}")
    package = Path(pyspark.__file__).parent
    spark_zip = package / "python" / "lib" / "pyspark.zip"
    assert spark_zip.is_file(), "pip's pyspark ships the zip Spark puts on its workers' path"
    environment = {**os.environ, "PYTHONPATH": f"{spark_zip}{os.pathsep}{package}/jars/x.jar"}
    imported = subprocess.run(
        [sys.executable, "-c", "import pyspark, sys; print(pyspark.__file__)"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert imported == pyspark.__file__, (
        "Spark's pyspark.zip came first: is rocketmq-spark installed as a wheel (the startup "
        "hook is not part of an editable install)?"
    )
