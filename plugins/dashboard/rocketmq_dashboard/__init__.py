"""A web console for RocketMQ clusters (``rocketmq dashboard -n NAMESRV``): the pages
rocketmq-dashboard users rely on, server-rendered, over the async Admin SDK."""
