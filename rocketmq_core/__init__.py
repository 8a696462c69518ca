"""rocketmq-py: a RocketMQ-compatible name server, broker and SDK, built as plugins."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("rocketmq-core")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
