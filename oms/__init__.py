"""OpenMessaging-style Python client for OrbitMQ (RocketMQ 5 gRPC v2): access point, messages, producer, consumers.

Start at ``oms.get_messaging_access_point("oms:rocketmq://127.0.0.1:9876/namespace")``; see docs/oms.md.
"""

from __future__ import annotations

from oms.access_point import MessagingAccessPoint, get_messaging_access_point
from oms.admin import ResourceManager
from oms.consumer import (
    ConsumeConcurrentlyStatus,
    ConsumeContext,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    MessageColumns,
    MessageModel,
    MessageSelector,
    PullConsumer,
    PullResult,
    PullStatus,
    PushConsumer,
)
from oms.errors import (
    OMSConnectionException,
    OMSException,
    OMSIllegalStateException,
    OMSMessageFormatException,
    OMSNotSupportedException,
    OMSResourceNotExistException,
    OMSRuntimeException,
    OMSSecurityException,
    OMSTimeOutException,
    OMSTimeoutException,
    OMSTransactionException,
)
from oms.future import Future
from oms.hookspecs import hookimpl
from oms.keys import BuiltinKeys, NonStandardKeys, OMSBuiltinKeys
from oms.keyvalue import KeyValue, new_key_value
from oms.message import BytesMessage
from oms.producer.producer import Producer
from oms.producer.result import SendResult, SendStatus, TransactionResolution
from oms.producer.selector import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
)
from oms.producer.transaction import LocalTransactionExecutor, TransactionalResult, TransactionContext
from oms.queue import MessageQueue
from oms.version import CLIENT_VERSION, SPEC_VERSION

spec_version = SPEC_VERSION

__all__ = [
    "CLIENT_VERSION",
    "SPEC_VERSION",
    "BuiltinKeys",
    "BytesMessage",
    "ConsumeConcurrentlyStatus",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "Future",
    "KeyValue",
    "LocalTransactionExecutor",
    "MessageColumns",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageSelector",
    "MessagingAccessPoint",
    "NonStandardKeys",
    "OMSBuiltinKeys",
    "OMSConnectionException",
    "OMSException",
    "OMSIllegalStateException",
    "OMSMessageFormatException",
    "OMSNotSupportedException",
    "OMSResourceNotExistException",
    "OMSRuntimeException",
    "OMSSecurityException",
    "OMSTimeOutException",
    "OMSTimeoutException",
    "OMSTransactionException",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "ResourceManager",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByMachineRoom",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "TransactionContext",
    "TransactionResolution",
    "TransactionalResult",
    "get_messaging_access_point",
    "hookimpl",
    "new_key_value",
    "spec_version",
]
