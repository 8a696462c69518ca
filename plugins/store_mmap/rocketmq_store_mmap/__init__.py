"""The CommitLog store of rocketmq-py: RocketMQ's on-disk layout in mapped files."""

from .store import MmapStore

__all__ = ["MmapStore"]
