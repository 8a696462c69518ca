"""Installs ``rocketmq_spark_startup.pth`` beside the packages (see
rocketmq_spark_startup.py for why); setuptools has no declarative way to ship one."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "rocketmq_spark_startup.pth"


class BuildWithStartupHook(build_py):
    def run(self) -> None:
        super().run()
        # a wheel holds what build_lib holds: the .pth lands in site-packages itself
        self.copy_file(str(Path(__file__).parent / PTH), str(Path(self.build_lib) / PTH))


setup(cmdclass={"build_py": BuildWithStartupHook})
