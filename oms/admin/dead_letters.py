"""Resending a dead letter: the message in ``%DLQ%<group>`` is read back as v2 hands it out and sent again to its
original topic with a plain v2 SendMessage (the DLQ copy stays)."""

from __future__ import annotations

import logging
import random

import grpc
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.admin import models as m
from oms.admin.configs import bad_request
from oms.admin.core import AdminCore, Broker, check, validated
from oms.client.endpoints import Endpoint
from oms.client.routes import route_from_response
from oms.client.rpc import SUCCESS_CODES, check_status
from oms.errors import (
    OMSException,
    OMSMessageFormatException,
    OMSResourceNotExistException,
    OMSRuntimeException,
    OMSSecurityException,
    from_rpc_error,
)
from oms.producer.result import STATUS_OF_CODE
from oms.url import parse_hosts
from orbitmq.errors import Code
from orbitmq.topics import dlq_topic
from orbitmq.validation import validate_group

log = logging.getLogger("oms.admin")


async def resend_dead_letter(
    core: AdminCore, group: str, msg_id: str | None, broker: str | None, offset: int | None, queue_id: int
) -> m.ResendResult:
    validated(validate_group, group)
    dlq = dlq_topic(group)
    if msg_id:
        found = [v for v in await core.query_by_id(msg_id, dlq, broker) if v.topic == dlq]
        if not found:
            raise OMSResourceNotExistException(Code.MESSAGE_NOT_FOUND, f"no message {msg_id!r} in {dlq}")
        letter = found[-1]  # dead-lettered more than once (resent, failed again): the latest copy
    elif offset is not None:
        letter = await core.query_by_offset(dlq, queue_id, offset, broker)
    else:
        raise bad_request("give the dead letter's message id, or its broker and offset in the DLQ queue")
    topic = letter.original_topic
    if not topic:
        raise OMSRuntimeException(
            Code.BAD_REQUEST, f"{letter.msg_id} in {dlq} does not record its original topic (RETRY_TOPIC)"
        )
    source = await core.broker_named([], letter.broker_name)
    message = await _pull_one(core, source, group, letter)
    message.topic.name = topic
    message.topic.resource_namespace = core.runtime.namespace
    return await _send(core, message, letter)


async def _pull_one(core: AdminCore, b: Broker, group: str, letter: m.MessageView) -> definition_pb2.Message:
    """The stored message as v2 hands it out: the body with its encoding, tag, keys and user properties."""
    # the admin view has the raw properties but not the body's compression flag; v2 PullMessage has both
    endpoint = Endpoint.of(parse_hosts(b.addr, b.addr))
    request = service_pb2.PullMessageRequest(
        group=definition_pb2.Resource(name=group, resource_namespace=core.runtime.namespace),
        message_queue=definition_pb2.MessageQueue(
            topic=definition_pb2.Resource(name=letter.topic, resource_namespace=core.runtime.namespace),
            id=letter.queue_id,
        ),
        offset=letter.queue_offset,
        batch_size=1,
    )
    what = f"PullMessage of {letter.topic} on {b.name}"
    found: definition_pb2.Message | None = None
    try:
        call = core.runtime.pool.stub(endpoint).PullMessage(
            request, metadata=core.headers.build(), timeout=core.timeout_s
        )
        async for response in call:
            kind = response.WhichOneof("content")
            if kind == "status":
                check(response.status.code, response.status.message, what)
            elif kind == "message" and found is None:
                found = response.message
    except grpc.RpcError as exc:
        raise from_rpc_error(exc, what) from None
    if found is None or found.system_properties.queue_offset != letter.queue_offset:
        raise OMSResourceNotExistException(
            Code.MESSAGE_NOT_FOUND, f"{what}: no message at offset {letter.queue_offset} any more"
        )
    out = definition_pb2.Message()
    out.CopyFrom(found)
    sp = out.system_properties
    for name in (
        "body_digest",
        "store_timestamp",
        "store_host",
        "delivery_timestamp",
        "receipt_handle",
        "queue_id",
        "queue_offset",
        "invisible_duration",
        "delivery_attempt",
        "orphaned_transaction_recovery_duration",
        "dead_letter_queue",
    ):
        sp.ClearField(name)
    sp.message_type = definition_pb2.FIFO if sp.HasField("message_group") else definition_pb2.NORMAL
    return out


async def _send(core: AdminCore, message: definition_pb2.Message, letter: m.MessageView) -> m.ResendResult:
    """A plain v2 SendMessage to a writable queue of the original topic, trying each broker once."""
    topic = message.topic.name
    request = service_pb2.QueryRouteRequest(
        topic=definition_pb2.Resource(name=topic, resource_namespace=core.runtime.namespace),
        endpoints=core.runtime.access_point.to_pb(),
    )
    access_point = core.runtime.access_point
    what = f"QueryRoute to {access_point}"
    response = await core.invoke(core.runtime.pool.stub(access_point).QueryRoute, request, what)
    check_status(response.status, what)
    route = route_from_response(topic, response)
    by_broker: dict[str, Endpoint] = {}
    for q in route.writable():
        by_broker.setdefault(q.broker_name, q.endpoint)
    if not by_broker:
        raise OMSRuntimeException(Code.FORBIDDEN, f"topic {topic!r} has no writable queue to resend to")
    order = list(by_broker.items())
    random.shuffle(order)
    last: OMSException | None = None
    for broker_name, endpoint in order:
        send = service_pb2.SendMessageRequest(messages=[message])
        what = f"SendMessage to {broker_name}"
        try:
            stub = core.runtime.pool.stub(endpoint)
            result = await core.invoke(stub.SendMessage, send, f"SendMessage to {endpoint}")
            top = int(result.status.code)
            if top not in SUCCESS_CODES and top not in STATUS_OF_CODE:
                check(top, result.status.message, what)
            if not result.entries:
                raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{what}: no result entry")
            entry = result.entries[0]
            if int(entry.status.code) not in STATUS_OF_CODE:
                check(int(entry.status.code), entry.status.message, what)
            return m.ResendResult(entry.message_id, topic, broker_name, int(entry.offset), letter)
        except (OMSMessageFormatException, OMSSecurityException):
            raise  # the message or the caller is refused: another broker would refuse it too
        except OMSException as exc:
            log.info("resending %s to %s failed: %s", letter.unique_id or letter.msg_id, broker_name, exc)
            last = exc
    assert last is not None
    raise last
