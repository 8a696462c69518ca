"""RocketMQ 5's gRPC protocol (``apache.rocketmq.v2.MessagingService``) in front of
rocketmq-py brokers, so the official 5.x clients work unchanged."""
