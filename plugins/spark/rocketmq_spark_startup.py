"""Run at the start of every Python process of the environment, by the
``rocketmq_spark_startup.pth`` this distribution installs: Spark starts its Python
processes (workers, and a new runner for every streaming query) with its own
``pyspark.zip`` first on the path. Python compiles every module it imports from a zip
afresh, with no bytecode cache: 0.5-0.6 s of each start here. When the zip is the one
inside the installed pyspark package, the package is the same code with cached
bytecode, so the zip is dropped from the path."""

import os
import sys


def prefer_compiled_pyspark() -> None:
    for entry in sys.path:
        if not entry.endswith("pyspark.zip"):
            continue
        # <site-packages>/pyspark/python/lib/pyspark.zip
        package = os.path.dirname(os.path.dirname(os.path.dirname(entry)))
        if (
            os.path.basename(package) == "pyspark"
            and os.path.dirname(package) in sys.path
            and os.path.isfile(os.path.join(package, "__init__.py"))
        ):
            sys.path.remove(entry)
        return
