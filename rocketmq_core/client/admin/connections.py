"""Admin requests on the clients online: the consumers of a group and the producers of
a group as the brokers see their connections (GET_*_CONNECTION_LIST), and what one
consumer says about itself (GET_CONSUMER_RUNNING_INFO, relayed by a broker)."""

from __future__ import annotations

from ...protocol.bodies import ConsumerConnection, ConsumerRunningInfo, ProducerConnection
from ...protocol.codes import RequestCode, ResponseCode
from ...protocol.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetProducerConnectionListRequestHeader,
)
from ..admin_types import AdminError, ConsumerConnections, ProducerConnections
from .base import AdminBase


class ConnectionAdmin(AdminBase):
    async def group_connections(self, group: str) -> ConsumerConnections:
        """GET_CONSUMER_CONNECTION_LIST from every master, merged by client id;
        AdminError CONSUMER_NOT_ONLINE when no broker has a consumer of ``group``."""
        result = ConsumerConnections(group)
        seen: set[str] = set()
        asked: list[str] = []
        for name, address in await self._masters():
            asked.append(name)
            response = await self._broker(
                address,
                RequestCode.GET_CONSUMER_CONNECTION_LIST,
                GetConsumerConnectionListRequestHeader(consumer_group=group),
                what=f"reading the connections of {group!r} on {name}",
                accept=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
            )
            if response.code != ResponseCode.SUCCESS:
                continue
            body = ConsumerConnection.decode(response.body)
            for connection in body.connection_set:
                if connection.client_id not in seen:
                    seen.add(connection.client_id)
                    result.connections.append(connection)
            if body.consume_type is not None:
                result.consume_type = body.consume_type.name
            if body.message_model is not None:
                result.message_model = body.message_model.name
            if body.consume_from_where is not None:
                result.consume_from_where = body.consume_from_where.name
            for topic, subscription in body.subscription_table.items():
                result.subscriptions[topic] = subscription.sub_string
        if not result.connections:
            raise AdminError(
                f"consumer group {group!r} has no online consumer"
                f" (asked {', '.join(asked) or 'no broker'})",
                code=ResponseCode.CONSUMER_NOT_ONLINE,
            )
        result.connections.sort(key=lambda c: c.client_id)
        return result

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False
    ) -> ConsumerRunningInfo:
        """What consumer ``client_id`` of ``group`` reports about itself, asked through
        the first master it is connected to; AdminError when none has it online."""
        header = GetConsumerRunningInfoRequestHeader(
            consumer_group=group, client_id=client_id, jstack_enable=jstack
        )
        answers: list[str] = []
        for name, address in await self._masters():
            response = await self._broker(
                address,
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                header,
                what=f"reading the running info of {client_id!r} in {group!r} on {name}",
                accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
            )
            if response.code == ResponseCode.SUCCESS:
                return ConsumerRunningInfo.decode(response.body)
            answers.append(f"{name}: {response.remark or 'no answer'}")  # not connected there
        raise AdminError(
            f"consumer {client_id!r} of group {group!r} did not report its running info"
            f" ({'; '.join(answers) or 'no broker'}); `group consumers {group}` lists the"
            " client ids online",
            code=ResponseCode.CONSUMER_NOT_ONLINE,
        )

    async def producer_connections(self, group: str, topic: str) -> ProducerConnections:
        """GET_PRODUCER_CONNECTION_LIST from every broker of ``topic``, merged by client
        id; AdminError when no broker has a producer of ``group``."""
        result = ProducerConnections(group, topic)
        seen: set[str] = set()
        answers: list[str] = []
        for name, address in await self._route_brokers(topic):
            response = await self._broker(
                address,
                RequestCode.GET_PRODUCER_CONNECTION_LIST,
                GetProducerConnectionListRequestHeader(producer_group=group),
                what=f"reading the producers of {group!r} on {name}",
                accept=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR),
            )
            if response.code != ResponseCode.SUCCESS:  # the group has no producer there
                answers.append(f"{name}: {response.remark or 'none'}")
                continue
            for connection in ProducerConnection.decode(response.body).connection_set:
                if connection.client_id not in seen:
                    seen.add(connection.client_id)
                    result.connections.append(connection)
        if not result.connections:
            raise AdminError(
                f"producer group {group!r} has no online producer on the brokers of"
                f" {topic!r} ({'; '.join(answers) or 'no broker'})"
            )
        result.connections.sort(key=lambda c: c.client_id)
        return result
