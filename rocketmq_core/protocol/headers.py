"""Typed custom headers <-> ``extFields`` (REMOTING.md §7, CODES.md §3).

A header is a dataclass declared with ``@custom_header``. Attribute names are
snake_case; the wire name is their camelCase form unless ``wire("...")`` says
otherwise. A field without a default is required ("not null" in Java).
Field types are ``str``, ``int`` (Java's Integer: an int32), ``Long`` (an int64) or
``bool``, optionally ``| None``. A value outside its type's range is refused as Java's
``Integer.parseInt`` refuses it, with INVALID_PARAMETER naming the field.

Decoding follows what real peers send: every value arrives as text (the codec has
already turned C++'s JSON numbers into decimal strings), booleans may be
``"true"``/``"false"`` (Java) or ``"1"``/``"0"`` (C++ <= 2.2). Encoding always
writes text: ints in decimal, booleans as ``"true"``/``"false"``, None left out.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..errors import HeaderError
from .codes import ResponseCode

# Java's Long: an int fits in an int32 unless declared Long. A marker only the codec
# reads: to a type checker (and to whoever builds a header) it is a plain int.
if TYPE_CHECKING:
    Long = int
else:
    Long = typing.NewType("Long", int)

_STR, _INT, _BOOL, _LONG = 0, 1, 2, 3
_KINDS = {str: _STR, int: _INT, bool: _BOOL, Long: _LONG}
_RANGES = {_INT: (-(2**31), 2**31 - 1, "an int32"), _LONG: (-(2**63), 2**63 - 1, "an int64")}

H = TypeVar("H", bound="CustomHeader")


def wire(name: str, *, default: Any = dataclasses.MISSING) -> Any:
    """A field whose wire name is not the camelCase of its attribute."""
    return dataclasses.field(default=default, metadata={"wire": name})


class CustomHeader:
    """Base of typed headers; see the module docstring."""

    __slots__ = ()
    # (attribute, wire name, kind, required), filled in by @custom_header
    _fields: ClassVar[tuple[_WireField, ...]] = ()
    if TYPE_CHECKING:  # set by dataclasses: what makes a header a DataclassInstance
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def from_ext_fields(
        cls: type[H], ext_fields: Mapping[str, str], names: Mapping[str, str] | None = None
    ) -> H:
        """Read the header from ``ext_fields``; ``names`` overrides wire names (V2).

        Raises HeaderError naming the field that is missing or malformed.
        """
        header: H = cls._codec(names).decode(ext_fields)
        return header

    def to_ext_fields(self, names: Mapping[str, str] | None = None) -> dict[str, str]:
        """The header as extFields, every value a string."""
        return self._codec(names).encode(self)

    # What dataclasses would generate for each header, written once here: a header class
    # then costs its import a third less (68 of them load with every broker).
    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name, _, _, _ in self._fields)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name, _, _, _ in self._fields)

    __hash__ = None  # type: ignore[assignment]  # compared by value, as a dataclass with eq

    @classmethod
    def wire_name(cls, attribute: str) -> str:
        """The extFields key of ``attribute`` (for hot paths that fill a template)."""
        for name, wire_name, _, _ in cls._fields:
            if name == attribute:
                return wire_name
        raise AttributeError(f"{cls.__name__} has no field {attribute!r}")

    @classmethod
    def _codec(cls, names: Mapping[str, str] | None) -> _Codec:
        """The compiled codec for ``names``; cached per mapping (they are module constants)."""
        cached = _CODECS.get((cls, id(names)))
        if cached is not None and cached.names is names:  # the very mapping, not a reused id
            return cached
        fields = tuple(
            (attribute, (names or {}).get(attribute, wire_name), kind, required)
            for attribute, wire_name, kind, required in cls._fields
        )
        codec = _CODECS[(cls, id(names))] = _Codec(cls, names, fields)
        return codec


class _Codec:
    """A header class's decode and encode for one set of wire names, compiled to straight
    Python (as dataclasses compiles ``__init__``): a send pays for every header twice,
    and a loop over field descriptions cost it ~3x more."""

    __slots__ = ("decode", "encode", "names")

    def __init__(
        self, cls: type, names: Mapping[str, str] | None, fields: tuple[_WireField, ...]
    ) -> None:
        self.names = names
        scope: dict[str, Any] = {
            "cls": cls,
            "new": object.__new__,
            "HeaderError": HeaderError,
            "INVALID_PARAMETER": ResponseCode.INVALID_PARAMETER,
            "shown": _shown,
            "parse_bool": _parse_bool,
        }
        defaults = {field.name: field for field in dataclasses.fields(cls)}
        decode = ["def decode(ext_fields):", "    get = ext_fields.get", "    header = new(cls)"]
        encode = ["def encode(header):", "    result = {}"]
        for attribute, wire_name, kind, required in fields:
            target = f"header.{attribute}"
            decode.append(f"    raw = get({wire_name!r})")
            if required:
                message = f"the custom field <{wire_name}> is null"
                decode.append(f"    if raw is None: raise HeaderError({message!r})")
            else:
                decode.append("    if raw is None:")
                decode.append(f"        {target} = {_default(defaults[attribute], scope)}")
                decode.append("    else:")
            indent = "    " if required else "        "
            if kind in _RANGES:
                low, high, what = _RANGES[kind]
                name = camel_case(attribute)  # a V2 one-letter name says little: add this
                label = f"<{wire_name}>" if wire_name == name else f"<{wire_name}> (<{name}>)"
                message = f"the custom field {label} is not an integer: "
                too_big = f"the custom field {label} is out of range for {what}: "
                refuse = "raise HeaderError({}, response_code=INVALID_PARAMETER) from None"
                decode.append(f"{indent}try: value = int(raw)")
                decode.append(f"{indent}except ValueError:")
                decode.append(f"{indent}    {refuse.format(f'{message!r} + shown(raw)')}")
                # one chained comparison: what the range costs a send's header
                decode.append(f"{indent}if not {low} <= value <= {high}:")
                decode.append(f"{indent}    {refuse.format(f'{too_big!r} + shown(raw)')}")
                decode.append(f"{indent}{target} = value")
            elif kind == _BOOL:
                decode.append(f"{indent}{target} = parse_bool(raw)")
            else:
                decode.append(f"{indent}{target} = raw")
            encode.append(f"    value = header.{attribute}")
            text = {
                _STR: "value",
                _INT: "str(value)",
                _LONG: "str(value)",
                _BOOL: "'true' if value else 'false'",
            }
            encode.append(f"    if value is not None: result[{wire_name!r}] = {text[kind]}")
        decode.append("    return header")
        encode.append("    return result")
        # our own text, compiled as dataclasses compiles __init__; named for tracebacks
        where = f"<{cls.__name__} codec>"
        exec(compile("\n".join(decode), where, "exec"), scope)
        exec(compile("\n".join(encode), where, "exec"), scope)
        self.decode: Callable[[Mapping[str, str]], Any] = scope["decode"]
        self.encode: Callable[[Any], dict[str, str]] = scope["encode"]


def _default(field: dataclasses.Field[Any], scope: dict[str, Any]) -> str:
    """The expression giving ``field``'s default inside a compiled decoder."""
    name = f"default_{field.name}"
    if field.default_factory is not dataclasses.MISSING:
        scope[name] = field.default_factory
        return f"{name}()"
    scope[name] = None if field.default is dataclasses.MISSING else field.default
    return name


# (attribute, wire name, kind, required)
_WireField = tuple[str, str, int, bool]
# (header class, id of a names mapping) -> its compiled codec
_CODECS: dict[tuple[type, int], _Codec] = {}


def _shown(raw: str) -> str:
    """``raw`` for a remark: a hostile 70,000-character value is cut short."""
    return repr(raw) if len(raw) <= 40 else f"{raw[:40]!r}... ({len(raw)} characters)"


def _parse_bool(raw: str) -> bool:
    # Java accepts only "true"; C++ <= 2.2 sends "1" for true (CODES.md §4.1 policy b).
    return raw == "1" or raw.lower() == "true"


def camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _kind_of(annotation: Any) -> tuple[int, bool]:
    """A field's kind, and whether it may be None, from its evaluated annotation."""
    optional = False
    if typing.get_origin(annotation) in (types.UnionType, typing.Union):
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        optional = len(members) < len(typing.get_args(annotation))
        (annotation,) = members
    return _KINDS[annotation], optional


# the annotations headers are written with (as text, under postponed evaluation): their
# kinds read from this table cost a header's import ~0.2 ms less than typing evaluating them
_WRITTEN_KINDS = {
    f"{name}{suffix}": (kind, bool(suffix))
    for name, kind in (("str", _STR), ("int", _INT), ("bool", _BOOL), ("Long", _LONG))
    for suffix in ("", " | None")
}


# tells type checkers that a header's __init__ takes its fields by keyword
@typing.dataclass_transform(kw_only_default=True, field_specifiers=(dataclasses.field, wire))
def custom_header(cls: type[H]) -> type[H]:
    """Make ``cls`` a keyword-only slotted dataclass and record its wire fields."""
    if not cls.__dict__.get("__doc__"):  # else dataclasses builds one from the signature
        cls.__doc__ = f"The custom header {cls.__name__}."
    cls = dataclasses.dataclass(kw_only=True, slots=True, repr=False, eq=False)(cls)
    hints: dict[str, Any] | None = None
    specs = []
    for field in dataclasses.fields(cls):
        written = _WRITTEN_KINDS.get(field.type) if isinstance(field.type, str) else None
        if written is not None:  # the usual annotation text: no evaluation needed
            kind, optional = written
        else:
            if hints is None:
                hints = typing.get_type_hints(cls)
            kind, optional = _kind_of(hints[field.name])
        has_default = (
            field.default is not dataclasses.MISSING
            or field.default_factory is not dataclasses.MISSING
        )
        required = not has_default and not optional
        wire_name = field.metadata.get("wire") or camel_case(field.name)
        specs.append((field.name, wire_name, kind, required))
    cls._fields = tuple(specs)
    return cls


# --- sending (CODES.md §3.1-§3.3) -----------------------------------------------


@custom_header
class SendMessageRequestHeader(CustomHeader):
    """SEND_MESSAGE (10); SEND_MESSAGE_V2/SEND_BATCH_MESSAGE use SEND_V2_NAMES."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    batch: bool | None = None
    max_reconsume_times: int | None = None
    broker_name: str | None = None


# SendMessageRequestHeaderV2's one-letter names, by V1 attribute.
SEND_V2_NAMES: Mapping[str, str] = types.MappingProxyType(
    {
        "producer_group": "a",
        "topic": "b",
        "default_topic": "c",
        "default_topic_queue_nums": "d",
        "queue_id": "e",
        "sys_flag": "f",
        "born_timestamp": "g",
        "flag": "h",
        "properties": "i",
        "reconsume_times": "j",
        "unit_mode": "k",
        "max_reconsume_times": "l",
        "batch": "m",
        "broker_name": "n",
    }
)


@custom_header
class SendMessageResponseHeader(CustomHeader):
    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None
    region_id: str | None = wire("MSG_REGION", default=None)
    trace_on: bool | None = wire("TRACE_ON", default=None)


# --- pulling and offsets (CODES.md §3.4-§3.6) ----------------------------------------


@custom_header
class PullMessageRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: Long
    max_msg_nums: int
    sys_flag: int
    commit_offset: Long
    suspend_timeout_millis: Long
    sub_version: Long
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None


@custom_header
class PullMessageResponseHeader(CustomHeader):
    suggest_which_broker_id: Long
    next_begin_offset: Long
    min_offset: Long
    max_offset: Long
    offset_delta: Long | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


@custom_header
class QueryConsumerOffsetRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@custom_header
class UpdateConsumerOffsetRequestHeader(CustomHeader):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: Long


@custom_header
class GetMaxOffsetRequestHeader(CustomHeader):
    topic: str
    queue_id: int
    committed: bool | None = None


@custom_header
class GetMinOffsetRequestHeader(CustomHeader):
    topic: str
    queue_id: int


@custom_header
class GetEarliestMsgStoretimeRequestHeader(CustomHeader):
    topic: str
    queue_id: int


@custom_header
class GetEarliestMsgStoretimeResponseHeader(CustomHeader):
    timestamp: Long


@custom_header
class SearchOffsetRequestHeader(CustomHeader):
    topic: str
    queue_id: int
    timestamp: Long
    boundary_type: str | None = None


@custom_header
class OffsetResponseHeader(CustomHeader):
    """The answer of QUERY_CONSUMER_OFFSET, GET_MAX/MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP."""

    offset: Long


@custom_header
class QueryMessageRequestHeader(CustomHeader):
    topic: str
    key: str
    max_num: int
    begin_timestamp: Long
    end_timestamp: Long
    unique_key_query: bool | None = wire("_UNIQUE_KEY_QUERY", default=None)


@custom_header
class QueryMessageResponseHeader(CustomHeader):
    index_last_update_timestamp: Long
    index_last_update_phyoffset: Long


@custom_header
class ViewMessageRequestHeader(CustomHeader):
    offset: Long
    topic: str | None = None


# --- clients, retries, transactions (CODES.md §3.7-§3.9) -----------------------------


@custom_header
class UnregisterClientRequestHeader(CustomHeader):
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@custom_header
class GetConsumerListByGroupRequestHeader(CustomHeader):
    consumer_group: str


@custom_header
class NotifyConsumerIdsChangedRequestHeader(CustomHeader):
    consumer_group: str


@custom_header
class GetConsumerRunningInfoRequestHeader(CustomHeader):
    consumer_group: str
    client_id: str
    jstack_enable: bool | None = None


@custom_header
class ConsumeMessageDirectlyResultRequestHeader(CustomHeader):
    """CONSUME_MESSAGE_DIRECTLY (309): admin -> broker (``msg_id`` an offset id of that
    broker), then broker -> consumer with ``broker_name`` and the sys flags filled in."""

    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None


@custom_header
class ResetOffsetRequestHeader(CustomHeader):
    group: str
    topic: str
    timestamp: Long
    is_force: bool = wire("isForce")
    queue_id: int | None = None
    offset: Long | None = None


@custom_header
class ConsumerSendMsgBackRequestHeader(CustomHeader):
    offset: Long
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None


@custom_header
class EndTransactionRequestHeader(CustomHeader):
    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool | None = None
    transaction_id: str | None = None
    topic: str | None = None


@custom_header
class CheckTransactionStateRequestHeader(CustomHeader):
    tran_state_table_offset: Long
    commit_log_offset: Long
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    topic: str | None = None
    broker_name: str | None = wire("bname", default=None)


@custom_header
class RecallMessageRequestHeader(CustomHeader):
    topic: str
    recall_handle: str
    producer_group: str | None = None
    broker_name: str | None = wire("bname", default=None)


@custom_header
class RecallMessageResponseHeader(CustomHeader):
    msg_id: str


# --- admin (CODES.md §1.2, §3.11) --------------------------------------------------


@custom_header
class CreateTopicRequestHeader(CustomHeader):
    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    topic_sys_flag: int | None = None
    order: bool = False
    attributes: str | None = None
    force: bool | None = None


@custom_header
class TopicRequestHeader(CustomHeader):
    """Requests naming just a topic: DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, ..."""

    topic: str


@custom_header
class GetConsumeStatsRequestHeader(CustomHeader):
    consumer_group: str
    topic: str | None = None


@custom_header
class GetConsumerConnectionListRequestHeader(CustomHeader):
    consumer_group: str


@custom_header
class DeleteSubscriptionGroupRequestHeader(CustomHeader):
    group_name: str
    clean_offset: bool | None = None


@custom_header
class GetProducerConnectionListRequestHeader(CustomHeader):
    producer_group: str


@custom_header
class QueryConsumeTimeSpanRequestHeader(CustomHeader):
    topic: str
    group: str


@custom_header
class CloneGroupOffsetRequestHeader(CustomHeader):
    """CLONE_GROUP_OFFSET: every topic of ``src_group`` when ``topic`` is absent."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@custom_header
class GetSubscriptionGroupConfigRequestHeader(CustomHeader):
    group: str


@custom_header
class GetBrokerConfigResponseHeader(CustomHeader):
    """GET_BROKER_CONFIG's answer: the configuration's DataVersion as JSON."""

    version: str


# --- name server (CODES.md §3.10) ------------------------------------------------


@custom_header
class GetRouteInfoRequestHeader(CustomHeader):
    topic: str
    accept_standard_json_only: bool | None = None


@custom_header
class RegisterBrokerRequestHeader(CustomHeader):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: Long
    heartbeat_timeout_millis: Long | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    body_crc32: int = 0
    # rocketmq-py: where else the broker listens (quic://ip:port;...); others ignore it
    endpoints: str | None = None


@custom_header
class RegisterBrokerResponseHeader(CustomHeader):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@custom_header
class BrokerIdentityRequestHeader(CustomHeader):
    """UNREGISTER_BROKER and QUERY_DATA_VERSION: which broker is asking."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: Long


@custom_header
class QueryDataVersionResponseHeader(CustomHeader):
    changed: bool


@custom_header
class BrokerHeartbeatRequestHeader(CustomHeader):
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: Long | None = None
    epoch: int | None = None
    max_offset: Long | None = None
    confirm_offset: Long | None = None
    heartbeat_timeout_mills: Long | None = None
    election_priority: int | None = None


@custom_header
class PutKVConfigRequestHeader(CustomHeader):
    namespace: str
    key: str
    value: str


@custom_header
class KVConfigKeyRequestHeader(CustomHeader):
    """GET_KV_CONFIG and DELETE_KV_CONFIG."""

    namespace: str
    key: str


@custom_header
class GetKVConfigResponseHeader(CustomHeader):
    value: str | None = None


@custom_header
class GetKVListByNamespaceRequestHeader(CustomHeader):
    namespace: str


@custom_header
class DeleteTopicFromNamesrvRequestHeader(CustomHeader):
    topic: str
    cluster_name: str | None = None


@custom_header
class GetTopicsByClusterRequestHeader(CustomHeader):
    cluster: str


@custom_header
class BrokerNameRequestHeader(CustomHeader):
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER."""

    broker_name: str


@custom_header
class WipeWritePermOfBrokerResponseHeader(CustomHeader):
    wipe_topic_count: int


@custom_header
class AddWritePermOfBrokerResponseHeader(CustomHeader):
    add_topic_count: int


@custom_header
class GetBrokerMemberGroupRequestHeader(CustomHeader):
    cluster_name: str
    broker_name: str


# --- ACL 1.0 admin requests (ACL.md §5) ----------------------------------------------------


@custom_header
class CreateAccessConfigRequestHeader(CustomHeader):
    """UPDATE_AND_CREATE_ACL_CONFIG; the perm lists are comma-joined ``res=PERM``."""

    access_key: str
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False  # Java's primitive boolean: an absent flag means false
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@custom_header
class DeleteAccessConfigRequestHeader(CustomHeader):
    access_key: str


@custom_header
class UpdateGlobalWhiteAddrsConfigRequestHeader(CustomHeader):
    """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG; an empty ``aclFileFullPath`` is the default file."""

    global_white_addrs: str
    acl_file_full_path: str | None = None


@custom_header
class GetBrokerAclConfigResponseHeader(CustomHeader):
    """GET_BROKER_CLUSTER_ACL_INFO's answer: DataVersion JSON of the default file, and a
    JSON map of every file's path to its DataVersion."""

    version: str
    broker_name: str
    broker_addr: str
    cluster_name: str
    all_acl_file_version: str | None = None


# --- broker statistics (METRICS.md §3) --------------------------------------------------


@custom_header
class ViewBrokerStatsDataRequestHeader(CustomHeader):
    """VIEW_BROKER_STATS_DATA: a statistic's name (TOPIC_PUT_NUMS) and key (``topic``,
    ``topic@group``, the cluster name)."""

    stats_name: str
    stats_key: str


@custom_header
class GetConsumeStatsInBrokerHeader(CustomHeader):
    """GET_BROKER_CONSUME_STATS: with ``isOrder``, only order topics."""

    is_order: bool
