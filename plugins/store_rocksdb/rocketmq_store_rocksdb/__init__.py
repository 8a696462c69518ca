"""The ``rocksdb`` store of rocketmq-py: the MessageStore contract on RocksDB."""
