"""The statistic names broker and admin client share live in one place."""

from __future__ import annotations

import inspect

from rocketmq_core.broker import stats as broker_stats
from rocketmq_core.client.admin import stats as admin_stats
from rocketmq_core.protocol import constants


def test_broker_and_admin_take_the_stat_names_from_the_protocol():
    assert (constants.TOPIC_PUT_NUMS, constants.GROUP_GET_NUMS) == (
        "TOPIC_PUT_NUMS",
        "GROUP_GET_NUMS",
    )
    for module in (broker_stats, admin_stats):
        source = inspect.getsource(module)
        assert 'TOPIC_PUT_NUMS = "' not in source and 'GROUP_GET_NUMS = "' not in source
        assert module.TOPIC_PUT_NUMS is constants.TOPIC_PUT_NUMS
        assert module.GROUP_GET_NUMS is constants.GROUP_GET_NUMS
