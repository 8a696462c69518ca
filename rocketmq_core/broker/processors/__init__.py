"""Broker request processors, one module per request family, bound by the broker plugin.

ACL and POP requests import their modules on the first such request: a starting broker
skips the ACL rules (and YAML) and POP's headers, and that first request pays ~40 ms (ACL)
or ~15 ms (POP). The other families cost under a millisecond on top of what a broker loads
anyway, so they load with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...protocol.codes import RequestCode
from ...registry import Deferred
from .. import transactions
from . import admin, client, consumer_calls, lock, offset, pull, query, retry, send_fast


class _FirstUse:
    """``family.function``: a processor of this package's module ``family``, which its
    first call imports (named apart from the module: ``from . import admin`` still imports
    the real one)."""

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, function: str) -> Callable[..., Any]:
        return _imported_on_first_call(self._module, function)


def _imported_on_first_call(module: str, function: str) -> Callable[..., Any]:
    deferred = Deferred(f"{__name__}.{module}:{function}")
    resolved: Callable[..., Any] | None = None

    def processor(*args: Any) -> Any:
        nonlocal resolved
        if resolved is None:
            resolved = deferred.make()
        return resolved(*args)

    # named as the function it stands for: route names and tests see the same
    processor.__module__ = f"{__name__}.{module}"
    processor.__name__ = processor.__qualname__ = function
    return processor


_acl, _pop = _FirstUse("acl"), _FirstUse("pop")

PROCESSORS: dict[int, Callable[..., Any]] = {
    RequestCode.SEND_MESSAGE: send_fast.send_message,
    RequestCode.SEND_MESSAGE_V2: send_fast.send_message,
    RequestCode.SEND_BATCH_MESSAGE: send_fast.send_message,
    RequestCode.PULL_MESSAGE: pull.pull_message,
    RequestCode.HEART_BEAT: client.heart_beat,
    RequestCode.UNREGISTER_CLIENT: client.unregister_client,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: client.get_consumer_list_by_group,
    RequestCode.QUERY_CONSUMER_OFFSET: offset.query_consumer_offset,
    RequestCode.UPDATE_CONSUMER_OFFSET: offset.update_consumer_offset,
    RequestCode.GET_MAX_OFFSET: offset.get_max_offset,
    RequestCode.GET_MIN_OFFSET: offset.get_min_offset,
    RequestCode.GET_EARLIEST_MSG_STORETIME: offset.get_earliest_msg_storetime,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: offset.search_offset_by_timestamp,
    RequestCode.CONSUMER_SEND_MSG_BACK: retry.consumer_send_msg_back,
    RequestCode.END_TRANSACTION: transactions.end_transaction,
    RequestCode.LOCK_BATCH_MQ: lock.lock_batch_mq,
    RequestCode.UNLOCK_BATCH_MQ: lock.unlock_batch_mq,
    RequestCode.QUERY_MESSAGE: query.query_message,
    RequestCode.VIEW_MESSAGE_BY_ID: query.view_message_by_id,
    # admin (CODES.md §1.2)
    RequestCode.UPDATE_AND_CREATE_TOPIC: admin.update_and_create_topic,
    RequestCode.DELETE_TOPIC_IN_BROKER: admin.delete_topic_in_broker,
    RequestCode.GET_ALL_TOPIC_CONFIG: admin.get_all_topic_config,
    RequestCode.GET_TOPIC_STATS_INFO: admin.get_topic_stats_info,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin.update_and_create_subscription_group,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin.get_all_subscription_group_config,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: admin.delete_subscription_group,
    RequestCode.GET_ALL_CONSUMER_OFFSET: admin.get_all_consumer_offset,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: admin.get_consumer_connection_list,
    RequestCode.GET_CONSUME_STATS: admin.get_consume_stats,
    RequestCode.GET_CONSUMER_RUNNING_INFO: consumer_calls.get_consumer_running_info,
    RequestCode.CONSUME_MESSAGE_DIRECTLY: consumer_calls.consume_message_directly,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: admin.invoke_broker_to_reset_offset,
    RequestCode.GET_BROKER_RUNTIME_INFO: admin.get_broker_runtime_info,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: admin.get_producer_connection_list,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: admin.query_topic_consume_by_who,
    RequestCode.QUERY_CONSUME_TIME_SPAN: admin.query_consume_time_span,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: admin.get_system_topic_list_from_broker,
    RequestCode.UPDATE_BROKER_CONFIG: admin.update_broker_config,
    RequestCode.GET_BROKER_CONFIG: admin.get_broker_config,
    RequestCode.CLONE_GROUP_OFFSET: admin.clone_group_offset,
    RequestCode.GET_TOPIC_CONFIG: admin.get_topic_config,
    RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: admin.get_subscription_group_config,
    RequestCode.VIEW_BROKER_STATS_DATA: admin.view_broker_stats_data,
    RequestCode.GET_BROKER_CONSUME_STATS: admin.get_broker_consume_stats,
    # ACL 1.0 accounts and white lists (ACL.md §5)
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: _acl.update_and_create_acl_config,
    RequestCode.DELETE_ACL_CONFIG: _acl.delete_acl_config,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: _acl.get_broker_cluster_acl_info,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: _acl.update_global_white_addrs_config,
    RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG: _acl.get_broker_cluster_acl_config,
    # POP consumption (POP.md §1)
    RequestCode.POP_MESSAGE: _pop.pop_message,
    RequestCode.ACK_MESSAGE: _pop.ack_message,
    RequestCode.BATCH_ACK_MESSAGE: _pop.batch_ack_message,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: _pop.change_message_invisible_time,
    RequestCode.PEEK_MESSAGE: _pop.peek_message,
    RequestCode.NOTIFICATION: _pop.notification,
    RequestCode.POLLING_INFO: _pop.polling_info,
}
