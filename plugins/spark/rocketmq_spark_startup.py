"""Run at the start of every Python process of the environment, by the
``rocketmq_spark_startup.pth`` this distribution installs: Spark starts its Python
processes (workers, and a new runner for every streaming query) with its own
``pyspark.zip`` first on the path. Python compiles every module it imports from a zip
afresh, with no bytecode cache: 0.5-0.6 s of each start here. When the zip is the one
inside the installed pyspark package, and that package is what ``import pyspark`` finds
without the zip, it is the same code with cached bytecode: the zip leaves the path."""

import os
import sys


def prefer_compiled_pyspark() -> None:
    for entry in sys.path:
        if os.path.basename(entry) != "pyspark.zip":
            continue
        # <site-packages>/pyspark/python/lib/pyspark.zip (SPARK_HOME is a real path)
        package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(entry))))
        if os.path.basename(package) == "pyspark" and _found_instead(entry) == package:
            sys.path.remove(entry)
        return


def _found_instead(entry: str) -> str | None:
    """The real path of the pyspark package the path finds once ``entry`` is gone."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("pyspark", [path for path in sys.path if path != entry])
    if spec is None or not spec.origin or os.path.basename(spec.origin) != "__init__.py":
        return None
    return os.path.dirname(os.path.realpath(spec.origin))
