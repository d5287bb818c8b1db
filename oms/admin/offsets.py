"""Committing chosen offsets for a group: cloneGroupOffset (another group's position) and skipAccumulatedMessage
(every queue's end). Running consumers pick the new offsets up on their next pull, as after resetOffsetByTime."""

from __future__ import annotations

from collections import defaultdict

from oms.admin import models as m
from oms.admin.core import AdminCore, Broker, validated
from orbitmq.proto import admin_pb2
from orbitmq.validation import validate_group, validate_topic


async def commit_offsets(
    core: AdminCore, group: str, topic: str, changes: list[m.OffsetChange]
) -> list[m.OffsetChange]:
    """Commit ``changes`` (one per queue) on the brokers they name; every broker must accept."""
    validated(validate_group, group)
    validated(validate_topic, topic, allow_system=True)
    by_broker: dict[str, dict[int, int]] = defaultdict(dict)
    for change in changes:
        by_broker[change.broker_name][change.queue_id] = change.offset
    brokers = [b for b in await core.topic_brokers(topic) if b.name in by_broker]

    async def one(b: Broker) -> None:
        request = admin_pb2.UpdateConsumerOffsetsRequest(group=group, topic=topic, offsets=by_broker[b.name])
        stub = core.admin_stub(b.addr)
        await core.admin(stub.UpdateConsumerOffsets, request, f"UpdateConsumerOffsets on {b.name}")

    core.all_ok(await core.each(brokers, one), f"commit offsets of {group!r} on {topic!r}")
    return sorted(changes, key=lambda c: (c.broker_name, c.queue_id))


async def clone_group_offset(core: AdminCore, source: str, target: str, topic: str) -> list[m.OffsetChange]:
    """Give ``target`` the offsets ``source`` committed on ``topic`` (queues ``source`` never committed stay)."""
    validated(validate_group, target)
    progress = await core.consumer_progress(source, topic)
    changes = [
        m.OffsetChange(q.topic, q.broker_name, q.queue_id, q.consumer_offset)
        for q in progress.queues
        if q.topic == topic and q.consumer_offset >= 0
    ]
    return await commit_offsets(core, target, topic, changes) if changes else []


async def skip_accumulated(core: AdminCore, group: str, topic: str) -> list[m.OffsetChange]:
    """Move ``group`` to the end of every queue of ``topic``: the backlog is skipped, new messages are consumed."""
    progress = await core.consumer_progress(group, topic)
    # progress lists every queue of the topic, committed or not, with its end offset
    changes = [m.OffsetChange(topic, q.broker_name, q.queue_id, q.broker_offset) for q in progress.queues]
    return await commit_offsets(core, group, topic, changes)
