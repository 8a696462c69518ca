"""The startup hook (rocketmq_spark_startup.pth): Spark's Python processes import the
installed, compiled pyspark instead of Spark's own uncompiled pyspark.zip."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import rocketmq_spark_startup


def fake_pyspark(site: Path, package_file: bool = True) -> str:
    """A pyspark package with its zip inside, as pip installs it; the zip's path."""
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    if package_file:
        (site / "pyspark" / "__init__.py").write_text("")
    (lib / "pyspark.zip").write_bytes(b"")
    return str(lib / "pyspark.zip")


def hooked(path: list[str], monkeypatch) -> list[str]:
    monkeypatch.setattr(sys, "path", list(path))
    monkeypatch.setattr(sys, "path_importer_cache", {})
    rocketmq_spark_startup.prefer_compiled_pyspark()
    return sys.path


def test_the_zip_of_the_installed_package_leaves_the_path(tmp_path, monkeypatch):
    site = tmp_path / "site-packages"
    zip_path = fake_pyspark(site)
    assert hooked([zip_path, "/elsewhere", str(site)], monkeypatch) == ["/elsewhere", str(site)]


def test_paths_through_a_symlink_are_the_same_package(tmp_path, monkeypatch):
    site = tmp_path / "real" / "site-packages"
    fake_pyspark(site)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    linked = tmp_path / "link" / "site-packages"
    zip_path = str(linked / "pyspark" / "python" / "lib" / "pyspark.zip")
    assert hooked([zip_path, str(linked)], monkeypatch) == [str(linked)]


@pytest.mark.parametrize(
    "case",
    [
        "package not on the path",
        "another pyspark comes first",
        "no package file beside the zip",
        "a Spark distribution's zip",
    ],
)
def test_any_other_zip_stays(tmp_path, monkeypatch, case):
    site = tmp_path / "site-packages"
    zip_path = fake_pyspark(site, package_file=case != "no package file beside the zip")
    path = [zip_path, str(site)]
    if case == "package not on the path":
        path = [zip_path, "/elsewhere"]
    elif case == "another pyspark comes first":  # e.g. a user's PYTHONPATH: Spark puts it next
        other = tmp_path / "other"
        (other / "pyspark").mkdir(parents=True)
        (other / "pyspark" / "__init__.py").write_text("")
        path = [zip_path, str(other), str(site)]
    elif case == "a Spark distribution's zip":  # $SPARK_HOME/python/lib: no package beside it
        spark_home = tmp_path / "spark-4.3.0-bin-hadoop3"
        (spark_home / "python" / "lib").mkdir(parents=True)
        path = [str(spark_home / "python" / "lib" / "pyspark.zip"), str(site)]
    assert hooked(path, monkeypatch) == path


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
