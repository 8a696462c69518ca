"""The admin commands of ``rocketmq`` (topic, cluster, group, message, offset, send,
consume), one module each; ``base`` holds what they share."""
