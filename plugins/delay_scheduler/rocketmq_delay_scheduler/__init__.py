"""Delayed delivery for rocketmq-py: delay levels (SCHEDULE_TOPIC_XXXX) and timer
messages (rmq_sys_wheel_timer), as a put hook, two broker services and RECALL_MESSAGE."""
