from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Status(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class TopicConfig(_message.Message):
    __slots__ = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "message_type", "order", "attributes")
    class AttributesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str
    order: bool
    attributes: _containers.ScalarMap[str, str]
    def __init__(self, topic_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[str] = ..., order: _Optional[bool] = ..., attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class GroupConfig(_message.Message):
    __slots__ = ("group_name", "consume_enable", "retry_max_times", "consume_message_orderly", "retry_queue_nums", "consume_broadcast_enable", "allocate_strategy", "allocate_options")
    class AllocateOptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUME_ENABLE_FIELD_NUMBER: _ClassVar[int]
    RETRY_MAX_TIMES_FIELD_NUMBER: _ClassVar[int]
    CONSUME_MESSAGE_ORDERLY_FIELD_NUMBER: _ClassVar[int]
    RETRY_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    CONSUME_BROADCAST_ENABLE_FIELD_NUMBER: _ClassVar[int]
    ALLOCATE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    consume_enable: bool
    retry_max_times: int
    consume_message_orderly: bool
    retry_queue_nums: int
    consume_broadcast_enable: bool
    allocate_strategy: str
    allocate_options: _containers.ScalarMap[str, str]
    def __init__(self, group_name: _Optional[str] = ..., consume_enable: _Optional[bool] = ..., retry_max_times: _Optional[int] = ..., consume_message_orderly: _Optional[bool] = ..., retry_queue_nums: _Optional[int] = ..., consume_broadcast_enable: _Optional[bool] = ..., allocate_strategy: _Optional[str] = ..., allocate_options: _Optional[_Mapping[str, str]] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ...) -> None: ...

class CreateOrUpdateTopicRequest(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: TopicConfig
    def __init__(self, config: _Optional[_Union[TopicConfig, _Mapping]] = ...) -> None: ...

class TopicResponse(_message.Message):
    __slots__ = ("status", "config")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    status: Status
    config: TopicConfig
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., config: _Optional[_Union[TopicConfig, _Mapping]] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("status", "topics")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    topics: _containers.RepeatedCompositeFieldContainer[TopicConfig]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicConfig, _Mapping]]] = ...) -> None: ...

class TopicStatusRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class QueueStatus(_message.Message):
    __slots__ = ("queue_id", "min_offset", "max_offset", "last_update_timestamp_ms")
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int
    def __init__(self, queue_id: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., last_update_timestamp_ms: _Optional[int] = ...) -> None: ...

class TopicStatusResponse(_message.Message):
    __slots__ = ("status", "queues")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    status: Status
    queues: _containers.RepeatedCompositeFieldContainer[QueueStatus]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueStatus, _Mapping]]] = ...) -> None: ...

class CreateOrUpdateGroupRequest(_message.Message):
    __slots__ = ("config",)
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    config: GroupConfig
    def __init__(self, config: _Optional[_Union[GroupConfig, _Mapping]] = ...) -> None: ...

class GroupResponse(_message.Message):
    __slots__ = ("status", "config")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    status: Status
    config: GroupConfig
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., config: _Optional[_Union[GroupConfig, _Mapping]] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("status", "groups")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    groups: _containers.RepeatedCompositeFieldContainer[GroupConfig]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., groups: _Optional[_Iterable[_Union[GroupConfig, _Mapping]]] = ...) -> None: ...

class ConsumerProgressRequest(_message.Message):
    __slots__ = ("group", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class QueueProgress(_message.Message):
    __slots__ = ("topic", "queue_id", "broker_offset", "consumer_offset", "lag")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., broker_offset: _Optional[int] = ..., consumer_offset: _Optional[int] = ..., lag: _Optional[int] = ...) -> None: ...

class ConsumerProgressResponse(_message.Message):
    __slots__ = ("status", "queues", "total_lag")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LAG_FIELD_NUMBER: _ClassVar[int]
    status: Status
    queues: _containers.RepeatedCompositeFieldContainer[QueueProgress]
    total_lag: int
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueProgress, _Mapping]]] = ..., total_lag: _Optional[int] = ...) -> None: ...

class ResetOffsetByTimeRequest(_message.Message):
    __slots__ = ("group", "topic", "timestamp_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    timestamp_ms: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class ResetOffsetByTimeResponse(_message.Message):
    __slots__ = ("status", "offsets")
    class OffsetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    offsets: _containers.ScalarMap[int, int]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., offsets: _Optional[_Mapping[int, int]] = ...) -> None: ...

class MessageView(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset", "commitlog_offset", "msg_id", "unique_id", "body", "properties", "born_timestamp_ms", "store_timestamp_ms", "born_host", "store_host", "reconsume_times", "store_size", "sys_flag")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITLOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    UNIQUE_ID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    STORE_SIZE_FIELD_NUMBER: _ClassVar[int]
    SYS_FLAG_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    msg_id: str
    unique_id: str
    body: bytes
    properties: _containers.ScalarMap[str, str]
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: str
    store_host: str
    reconsume_times: int
    store_size: int
    sys_flag: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., commitlog_offset: _Optional[int] = ..., msg_id: _Optional[str] = ..., unique_id: _Optional[str] = ..., body: _Optional[bytes] = ..., properties: _Optional[_Mapping[str, str]] = ..., born_timestamp_ms: _Optional[int] = ..., store_timestamp_ms: _Optional[int] = ..., born_host: _Optional[str] = ..., store_host: _Optional[str] = ..., reconsume_times: _Optional[int] = ..., store_size: _Optional[int] = ..., sys_flag: _Optional[int] = ...) -> None: ...

class QueryMessageByIdRequest(_message.Message):
    __slots__ = ("msg_id", "topic")
    MSG_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    msg_id: str
    topic: str
    def __init__(self, msg_id: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class QueryMessageByKeyRequest(_message.Message):
    __slots__ = ("topic", "key", "max_num", "begin_timestamp_ms", "end_timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    max_num: int
    begin_timestamp_ms: int
    end_timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., max_num: _Optional[int] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ...) -> None: ...

class QueryMessageByOffsetRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class QueryMessageResponse(_message.Message):
    __slots__ = ("status", "messages")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    status: Status
    messages: _containers.RepeatedCompositeFieldContainer[MessageView]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[MessageView, _Mapping]]] = ...) -> None: ...

class BrokerRuntimeInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerRuntimeInfoResponse(_message.Message):
    __slots__ = ("status", "info")
    class InfoEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    status: Status
    info: _containers.ScalarMap[str, str]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., info: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ClientConnectionsRequest(_message.Message):
    __slots__ = ("group", "topic", "producers")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PRODUCERS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    producers: bool
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., producers: _Optional[bool] = ...) -> None: ...

class ClientConnection(_message.Message):
    __slots__ = ("client_id", "client_type", "address", "language", "version", "group", "subscriptions", "topics", "last_heartbeat_ms_ago", "connected", "settings_json")
    class SubscriptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIPTIONS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_AGO_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_JSON_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    client_type: str
    address: str
    language: str
    version: str
    group: str
    subscriptions: _containers.ScalarMap[str, str]
    topics: _containers.RepeatedScalarFieldContainer[str]
    last_heartbeat_ms_ago: int
    connected: bool
    settings_json: str
    def __init__(self, client_id: _Optional[str] = ..., client_type: _Optional[str] = ..., address: _Optional[str] = ..., language: _Optional[str] = ..., version: _Optional[str] = ..., group: _Optional[str] = ..., subscriptions: _Optional[_Mapping[str, str]] = ..., topics: _Optional[_Iterable[str]] = ..., last_heartbeat_ms_ago: _Optional[int] = ..., connected: _Optional[bool] = ..., settings_json: _Optional[str] = ...) -> None: ...

class ClientConnectionsResponse(_message.Message):
    __slots__ = ("status", "connections")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    connections: _containers.RepeatedCompositeFieldContainer[ClientConnection]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., connections: _Optional[_Iterable[_Union[ClientConnection, _Mapping]]] = ...) -> None: ...

class UpdateConsumerOffsetsRequest(_message.Message):
    __slots__ = ("group", "topic", "offsets")
    class OffsetsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    offsets: _containers.ScalarMap[int, int]
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., offsets: _Optional[_Mapping[int, int]] = ...) -> None: ...

class BrokerConfigRequest(_message.Message):
    __slots__ = ("updates",)
    class UpdatesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    UPDATES_FIELD_NUMBER: _ClassVar[int]
    updates: _containers.ScalarMap[str, str]
    def __init__(self, updates: _Optional[_Mapping[str, str]] = ...) -> None: ...

class BrokerConfigResponse(_message.Message):
    __slots__ = ("status", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    status: Status
    config: _containers.ScalarMap[str, str]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...

class BrokerStatsRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class GroupStats(_message.Message):
    __slots__ = ("group", "out_tps", "out_24h", "accumulation")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    OUT_TPS_FIELD_NUMBER: _ClassVar[int]
    OUT_24H_FIELD_NUMBER: _ClassVar[int]
    ACCUMULATION_FIELD_NUMBER: _ClassVar[int]
    group: str
    out_tps: float
    out_24h: int
    accumulation: int
    def __init__(self, group: _Optional[str] = ..., out_tps: _Optional[float] = ..., out_24h: _Optional[int] = ..., accumulation: _Optional[int] = ...) -> None: ...

class TopicStats(_message.Message):
    __slots__ = ("topic", "in_tps", "in_24h", "groups")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    IN_TPS_FIELD_NUMBER: _ClassVar[int]
    IN_24H_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    in_tps: float
    in_24h: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupStats]
    def __init__(self, topic: _Optional[str] = ..., in_tps: _Optional[float] = ..., in_24h: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupStats, _Mapping]]] = ...) -> None: ...

class BrokerStatsResponse(_message.Message):
    __slots__ = ("status", "topics")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    topics: _containers.RepeatedCompositeFieldContainer[TopicStats]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[TopicStats, _Mapping]]] = ...) -> None: ...

class AclAccountsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AclAccount(_message.Message):
    __slots__ = ("access_key", "admin", "white_remote_address", "default_topic_perm", "default_group_perm", "topic_perms", "group_perms")
    class TopicPermsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class GroupPermsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ACCESS_KEY_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    WHITE_REMOTE_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TOPIC_PERM_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_GROUP_PERM_FIELD_NUMBER: _ClassVar[int]
    TOPIC_PERMS_FIELD_NUMBER: _ClassVar[int]
    GROUP_PERMS_FIELD_NUMBER: _ClassVar[int]
    access_key: str
    admin: bool
    white_remote_address: str
    default_topic_perm: str
    default_group_perm: str
    topic_perms: _containers.ScalarMap[str, str]
    group_perms: _containers.ScalarMap[str, str]
    def __init__(self, access_key: _Optional[str] = ..., admin: _Optional[bool] = ..., white_remote_address: _Optional[str] = ..., default_topic_perm: _Optional[str] = ..., default_group_perm: _Optional[str] = ..., topic_perms: _Optional[_Mapping[str, str]] = ..., group_perms: _Optional[_Mapping[str, str]] = ...) -> None: ...

class AclAccountsResponse(_message.Message):
    __slots__ = ("status", "acl_enabled", "accounts")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACL_ENABLED_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    acl_enabled: bool
    accounts: _containers.RepeatedCompositeFieldContainer[AclAccount]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., acl_enabled: _Optional[bool] = ..., accounts: _Optional[_Iterable[_Union[AclAccount, _Mapping]]] = ...) -> None: ...
