"""Dead-letter messages: a copy of a message that failed ``max_attempts`` deliveries, put to ``%DLQ%<group>``.

The copy keeps the message id (UNIQ_KEY), the original topic (RETRY_TOPIC, DLQ_ORIGIN_TOPIC) and reconsume count.
"""

from __future__ import annotations

from broker.store.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    MessageExt,
    MessageExtBrokerInner,
)
from orbitmq import message_const as mc
from orbitmq.topics import dlq_topic

DLQ_NUMS_PER_GROUP = 1

# A dead letter (or a retry copy) is an ordinary message: it must not be re-scheduled or held as a half message.
DROPPED_PROPERTIES = frozenset(
    {mc.PROPERTY_TIMER_DELIVER_MS, mc.PROPERTY_DELAY_TIME_LEVEL, mc.PROPERTY_TRANSACTION_PREPARED, mc.PROPERTY_POP_CK}
)
TRANSACTION_BITS = TRANSACTION_PREPARED_TYPE | TRANSACTION_COMMIT_TYPE | TRANSACTION_ROLLBACK_TYPE


def dead_letter(group: str, msg: MessageExt, attempts: int, store_host: tuple[str, int]) -> MessageExtBrokerInner:
    props = {k: v for k, v in msg.properties.items() if k not in DROPPED_PROPERTIES}
    origin_id = msg.unique_id or msg.msg_id
    if mc.PROPERTY_RETRY_TOPIC not in props:
        props[mc.PROPERTY_RETRY_TOPIC] = msg.topic
    props.setdefault(mc.PROPERTY_ORIGIN_MESSAGE_ID, origin_id)
    props[mc.PROPERTY_DLQ_ORIGIN_TOPIC] = msg.topic
    props[mc.PROPERTY_DLQ_ORIGIN_MESSAGE_ID] = origin_id
    props[mc.PROPERTY_RECONSUME_TIME] = str(attempts)
    return MessageExtBrokerInner(
        topic=dlq_topic(group),
        body=msg.body,
        queue_id=0,
        properties=props,
        flag=msg.flag,
        sys_flag=msg.sys_flag & ~TRANSACTION_BITS,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        store_host=store_host,
        reconsume_times=attempts,
    )
