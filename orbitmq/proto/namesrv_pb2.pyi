from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicConfigData(_message.Message):
    __slots__ = ("topic_name", "read_queue_nums", "write_queue_nums", "perm", "order", "message_type", "attributes")
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
    ORDER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    topic_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    order: bool
    message_type: str
    attributes: _containers.ScalarMap[str, str]
    def __init__(self, topic_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., order: _Optional[bool] = ..., message_type: _Optional[str] = ..., attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class BrokerRegistration(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr", "ha_addr", "topic_configs", "data_version", "auto_create_topic_enable", "default_topic_queue_nums", "group_policies", "remoting_addr")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_ADDR_FIELD_NUMBER: _ClassVar[int]
    TOPIC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTO_CREATE_TOPIC_ENABLE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TOPIC_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    GROUP_POLICIES_FIELD_NUMBER: _ClassVar[int]
    REMOTING_ADDR_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_addr: str
    topic_configs: _containers.RepeatedCompositeFieldContainer[TopicConfigData]
    data_version: int
    auto_create_topic_enable: bool
    default_topic_queue_nums: int
    group_policies: _containers.RepeatedCompositeFieldContainer[GroupPolicyData]
    remoting_addr: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ..., ha_addr: _Optional[str] = ..., topic_configs: _Optional[_Iterable[_Union[TopicConfigData, _Mapping]]] = ..., data_version: _Optional[int] = ..., auto_create_topic_enable: _Optional[bool] = ..., default_topic_queue_nums: _Optional[int] = ..., group_policies: _Optional[_Iterable[_Union[GroupPolicyData, _Mapping]]] = ..., remoting_addr: _Optional[str] = ...) -> None: ...

class GroupPolicyData(_message.Message):
    __slots__ = ("group_name", "fifo", "max_delivery_attempts")
    GROUP_NAME_FIELD_NUMBER: _ClassVar[int]
    FIFO_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERY_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    group_name: str
    fifo: bool
    max_delivery_attempts: int
    def __init__(self, group_name: _Optional[str] = ..., fifo: _Optional[bool] = ..., max_delivery_attempts: _Optional[int] = ...) -> None: ...

class RegisterBrokerResult(_message.Message):
    __slots__ = ("code", "message", "master_addr", "ha_server_addr")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MASTER_ADDR_FIELD_NUMBER: _ClassVar[int]
    HA_SERVER_ADDR_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    master_addr: str
    ha_server_addr: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., master_addr: _Optional[str] = ..., ha_server_addr: _Optional[str] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "broker_addr")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., broker_addr: _Optional[str] = ...) -> None: ...

class SimpleResult(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class QueueDataProto(_message.Message):
    __slots__ = ("broker_name", "read_queue_nums", "write_queue_nums", "perm", "message_type")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str
    def __init__(self, broker_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[str] = ...) -> None: ...

class BrokerDataProto(_message.Message):
    __slots__ = ("cluster", "broker_name", "broker_addrs")
    class BrokerAddrsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDRS_FIELD_NUMBER: _ClassVar[int]
    cluster: str
    broker_name: str
    broker_addrs: _containers.ScalarMap[int, str]
    def __init__(self, cluster: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_addrs: _Optional[_Mapping[int, str]] = ...) -> None: ...

class GetRouteInfoRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class GetRouteInfoResponse(_message.Message):
    __slots__ = ("code", "message", "queue_datas", "broker_datas")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DATAS_FIELD_NUMBER: _ClassVar[int]
    BROKER_DATAS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    queue_datas: _containers.RepeatedCompositeFieldContainer[QueueDataProto]
    broker_datas: _containers.RepeatedCompositeFieldContainer[BrokerDataProto]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., queue_datas: _Optional[_Iterable[_Union[QueueDataProto, _Mapping]]] = ..., broker_datas: _Optional[_Iterable[_Union[BrokerDataProto, _Mapping]]] = ...) -> None: ...

class GetClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BrokerNameList(_message.Message):
    __slots__ = ("broker_names",)
    BROKER_NAMES_FIELD_NUMBER: _ClassVar[int]
    broker_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, broker_names: _Optional[_Iterable[str]] = ...) -> None: ...

class GetClusterInfoResponse(_message.Message):
    __slots__ = ("code", "message", "broker_addr_table", "cluster_addr_table")
    class BrokerAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BrokerDataProto
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BrokerDataProto, _Mapping]] = ...) -> None: ...
    class ClusterAddrTableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BrokerNameList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BrokerNameList, _Mapping]] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BROKER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ADDR_TABLE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    broker_addr_table: _containers.MessageMap[str, BrokerDataProto]
    cluster_addr_table: _containers.MessageMap[str, BrokerNameList]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., broker_addr_table: _Optional[_Mapping[str, BrokerDataProto]] = ..., cluster_addr_table: _Optional[_Mapping[str, BrokerNameList]] = ...) -> None: ...

class GetAllTopicListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetAllTopicListResponse(_message.Message):
    __slots__ = ("code", "message", "topics")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class KVConfigRequest(_message.Message):
    __slots__ = ("namespace", "key", "value")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    key: str
    value: str
    def __init__(self, namespace: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class KVConfigResponse(_message.Message):
    __slots__ = ("code", "message", "value")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    value: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class BrokerWritePermRequest(_message.Message):
    __slots__ = ("broker_name", "writable")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    writable: bool
    def __init__(self, broker_name: _Optional[str] = ..., writable: _Optional[bool] = ...) -> None: ...

class BrokerWritePermResult(_message.Message):
    __slots__ = ("code", "message", "topic_count")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOPIC_COUNT_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    topic_count: int
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., topic_count: _Optional[int] = ...) -> None: ...

class NamesrvConfigRequest(_message.Message):
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

class NamesrvConfigResponse(_message.Message):
    __slots__ = ("code", "message", "config")
    class ConfigEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    config: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., config: _Optional[_Mapping[str, str]] = ...) -> None: ...
