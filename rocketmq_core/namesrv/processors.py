"""Name-server request processors (CODES.md §1.3), one function per request code.

Each is ``(namesrv, ctx, request)``; the built-in namesrv plugin binds them to the
running NameServer and registers them by code. Failures a client can act on are
answered with their ResponseCode (RequestRefused, HeaderError, BodyError).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config_update import apply_config_update
from ..errors import RequestRefused
from ..protocol import fastjson
from ..protocol.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicList,
    TopicRouteData,
)
from ..protocol.codes import VERSION_V4_9_4, RequestCode, ResponseCode
from ..protocol.command import RemotingCommand
from ..protocol.constants import ORDER_TOPIC_CONFIG_NAMESPACE
from ..protocol.headers import (
    AddWritePermOfBrokerResponseHeader,
    BrokerHeartbeatRequestHeader,
    BrokerIdentityRequestHeader,
    BrokerNameRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetBrokerMemberGroupRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    KVConfigKeyRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    TopicRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)

if TYPE_CHECKING:
    from ..remoting.processor import RequestContext
    from .server import NameServer

Request = RemotingCommand
FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


# --- KV config ---------------------------------------------------------------------------


async def put_kv_config(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = PutKVConfigRequestHeader.from_ext_fields(request.ext_fields or {})
    namesrv.kv.put(header.namespace, header.key, header.value)
    await namesrv.kv.persist()
    return request.response()


def get_kv_config(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = KVConfigKeyRequestHeader.from_ext_fields(request.ext_fields or {})
    value = namesrv.kv.get(header.namespace, header.key)
    if value is None:
        raise RequestRefused(
            ResponseCode.QUERY_NOT_FOUND,
            f"No config item, Namespace: {header.namespace} Key: {header.key}",
        )
    return request.response(ext_fields=GetKVConfigResponseHeader(value=value).to_ext_fields())


async def delete_kv_config(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = KVConfigKeyRequestHeader.from_ext_fields(request.ext_fields or {})
    if namesrv.kv.delete(header.namespace, header.key):
        await namesrv.kv.persist()
    return request.response()


def get_kv_list_by_namespace(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = GetKVListByNamespaceRequestHeader.from_ext_fields(request.ext_fields or {})
    table = namesrv.kv.namespace(header.namespace)
    if not table:
        raise RequestRefused(
            ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
        )
    return request.response(body=KVTable(table).encode())


# --- brokers -----------------------------------------------------------------------------


def register_broker(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    ext = request.ext_fields or {}
    header = RegisterBrokerRequestHeader.from_ext_fields(ext)
    body = request.body
    if header.body_crc32 and body and zlib.crc32(body) & 0x7FFFFFFF != header.body_crc32:
        raise RequestRefused(
            ResponseCode.SYSTEM_ERROR,
            f"crc32 not match: the REGISTER_BROKER body of {header.broker_addr} is damaged",
        )
    registration_body = RegisterBrokerBody.decode(body, header.compressed) if body else None
    registration = namesrv.routes.register_broker(
        cluster=header.cluster_name,
        broker_addr=header.broker_addr,
        broker_name=header.broker_name,
        broker_id=header.broker_id,
        ha_server_addr=header.ha_server_addr,
        topics=registration_body.topic_config_wrapper if registration_body else None,
        filter_server_list=registration_body.filter_server_list if registration_body else (),
        channel=ctx.connection,
        now=namesrv.now(),
        timeout=header.heartbeat_timeout_millis,
        zone_name=ext.get("__ZONE_NAME"),
        endpoints=[part for part in (header.endpoints or "").split(";") if part],
    )
    reply_header = RegisterBrokerResponseHeader(
        ha_server_addr=registration.ha_server_addr, master_addr=registration.master_addr
    )
    reply_body = b""
    if namesrv.config.return_order_topic_config_to_broker:
        order_conf = namesrv.kv.namespace(ORDER_TOPIC_CONFIG_NAMESPACE)
        if order_conf:
            reply_body = KVTable(order_conf).encode()
    return request.response(ext_fields=reply_header.to_ext_fields(), body=reply_body)


def unregister_broker(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = BrokerIdentityRequestHeader.from_ext_fields(request.ext_fields or {})
    namesrv.routes.unregister_broker(
        cluster=header.cluster_name,
        broker_addr=header.broker_addr,
        broker_name=header.broker_name,
        broker_id=header.broker_id,
    )
    return request.response()


def broker_heartbeat(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = BrokerHeartbeatRequestHeader.from_ext_fields(request.ext_fields or {})
    namesrv.routes.refresh(header.broker_addr, namesrv.now())
    return request.response()


def query_data_version(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = BrokerIdentityRequestHeader.from_ext_fields(request.ext_fields or {})
    version = DataVersion.from_json(_json_body(request)) if request.body else DataVersion()
    changed = namesrv.routes.data_version_changed(header.broker_addr, version)
    if not changed:
        namesrv.routes.refresh(header.broker_addr, namesrv.now())
    live = namesrv.routes.live.get(header.broker_addr)
    return request.response(
        ext_fields=QueryDataVersionResponseHeader(changed=changed).to_ext_fields(),
        body=live.data_version.encode() if live is not None else b"",
    )


def _json_body(request: Request) -> Any:
    try:
        return fastjson.loads(request.body)
    except ValueError as exc:
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, f"the body is not JSON: {exc}") from None


def wipe_write_perm_of_broker(
    namesrv: NameServer, ctx: RequestContext, request: Request
) -> Request:
    header = BrokerNameRequestHeader.from_ext_fields(request.ext_fields or {})
    count = namesrv.routes.change_write_perm(header.broker_name, writable=False)
    reply = WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count)
    return request.response(ext_fields=reply.to_ext_fields())


def add_write_perm_of_broker(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = BrokerNameRequestHeader.from_ext_fields(request.ext_fields or {})
    count = namesrv.routes.change_write_perm(header.broker_name, writable=True)
    reply = AddWritePermOfBrokerResponseHeader(add_topic_count=count)
    return request.response(ext_fields=reply.to_ext_fields())


def get_broker_member_group(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = GetBrokerMemberGroupRequestHeader.from_ext_fields(request.ext_fields or {})
    group = namesrv.routes.member_group(header.cluster_name, header.broker_name)
    return request.response(body=group.encode())


# --- routes and topics -------------------------------------------------------------------


def get_route_info_by_topic(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = GetRouteInfoRequestHeader.from_ext_fields(request.ext_fields or {})
    # clients before 4.9.4 (every C++ client) get fastjson's bare numeric keys
    standard = bool(header.accept_standard_json_only) or request.version >= VERSION_V4_9_4
    order_conf = None
    if namesrv.config.order_message_enable:
        order_conf = namesrv.kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, header.topic)
    if order_conf is None:
        body = namesrv.routes.route_body(header.topic, standard)
    else:
        route = namesrv.routes.route(header.topic)
        if route is not None:
            route.order_topic_conf = order_conf
        body = route.encode(standard=standard) if route is not None else None
    if body is None:
        raise RequestRefused(
            ResponseCode.TOPIC_NOT_EXIST,
            f"No topic route info in name server for the topic: {header.topic}{FAQ}",
        )
    return request.response(body=body)


def register_topic_in_namesrv(
    namesrv: NameServer, ctx: RequestContext, request: Request
) -> Request:
    header = TopicRequestHeader.from_ext_fields(request.ext_fields or {})
    if request.body:
        route = TopicRouteData.decode(request.body)
        namesrv.routes.register_topic(header.topic, route.queue_datas)
    return request.response()


def delete_topic_in_namesrv(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(request.ext_fields or {})
    namesrv.routes.delete_topic(header.topic, header.cluster_name)
    return request.response()


def get_broker_cluster_info(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    return request.response(body=namesrv.routes.cluster_info().encode())


def get_all_topic_list(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    if not namesrv.config.enable_all_topic_list:
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, "disable")
    return request.response(body=TopicList(namesrv.routes.topics()).encode())


def _topic_list_enabled(namesrv: NameServer) -> None:
    if not namesrv.config.enable_topic_list:
        raise RequestRefused(ResponseCode.SYSTEM_ERROR, "disable")


def get_topics_by_cluster(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    _topic_list_enabled(namesrv)
    header = GetTopicsByClusterRequestHeader.from_ext_fields(request.ext_fields or {})
    topics = namesrv.routes.topics_of_cluster(header.cluster)
    return request.response(body=TopicList(topics).encode())


def get_system_topic_list(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    topics, broker_addr = namesrv.routes.system_topics()
    return request.response(body=TopicList(topics, broker_addr).encode())


def _unit_topic_list(*, unit: bool | None, unit_sub: bool | None) -> Callable[..., Request]:
    def processor(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
        _topic_list_enabled(namesrv)
        topics = namesrv.routes.unit_topics(unit=unit, unit_sub=unit_sub)
        return request.response(body=TopicList(topics).encode())

    return processor


get_unit_topic_list = _unit_topic_list(unit=True, unit_sub=None)
get_has_unit_sub_topic_list = _unit_topic_list(unit=None, unit_sub=True)
get_has_unit_sub_ununit_topic_list = _unit_topic_list(unit=False, unit_sub=True)


# --- the name server's own configuration -------------------------------------------------


async def update_namesrv_config(
    namesrv: NameServer, ctx: RequestContext, request: Request
) -> Request:
    values = apply_config_update(
        namesrv.config,
        request.body,
        black_list=namesrv.config.black_listed(),
        source="UPDATE_NAMESRV_CONFIG",
    )
    if values:
        await namesrv.config_updated()
    return request.response()


def get_namesrv_config(namesrv: NameServer, ctx: RequestContext, request: Request) -> Request:
    return request.response(body=namesrv.config.to_text().encode())


PROCESSORS: dict[int, Callable[..., Any]] = {
    RequestCode.PUT_KV_CONFIG: put_kv_config,
    RequestCode.GET_KV_CONFIG: get_kv_config,
    RequestCode.DELETE_KV_CONFIG: delete_kv_config,
    RequestCode.GET_KVLIST_BY_NAMESPACE: get_kv_list_by_namespace,
    RequestCode.REGISTER_BROKER: register_broker,
    RequestCode.UNREGISTER_BROKER: unregister_broker,
    RequestCode.BROKER_HEARTBEAT: broker_heartbeat,
    RequestCode.QUERY_DATA_VERSION: query_data_version,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: wipe_write_perm_of_broker,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: add_write_perm_of_broker,
    RequestCode.GET_BROKER_MEMBER_GROUP: get_broker_member_group,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: get_route_info_by_topic,
    RequestCode.REGISTER_TOPIC_IN_NAMESRV: register_topic_in_namesrv,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: delete_topic_in_namesrv,
    RequestCode.GET_BROKER_CLUSTER_INFO: get_broker_cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: get_all_topic_list,
    RequestCode.GET_TOPICS_BY_CLUSTER: get_topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: get_system_topic_list,
    RequestCode.GET_UNIT_TOPIC_LIST: get_unit_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: get_has_unit_sub_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: get_has_unit_sub_ununit_topic_list,
    RequestCode.UPDATE_NAMESRV_CONFIG: update_namesrv_config,
    RequestCode.GET_NAMESRV_CONFIG: get_namesrv_config,
}
