"""An in-process broker core for pop tests: a real store in a tmp dir, real managers, the v2 receive/ack handlers,
no gRPC server.

``GrpcContextStub`` stands in for the grpc.aio servicer context (deadline and metadata are all the service reads).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.builtin_plugins import builtin_plugins
from broker.config import BrokerConfig
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.context import BrokerContext
from broker.grpc.receive import ReceiveService
from broker.long_polling import LongPollingService
from broker.plugins import BrokerPlugins
from broker.pop.config import PopConfig
from broker.pop.service import PopService
from broker.store.config import MessageStoreConfig
from broker.store.message import MessageExtBrokerInner
from broker.store.message_store import DefaultMessageStore
from broker.subscription_group_manager import SubscriptionGroupConfig, SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager
from orbitmq import message_const as mc
from orbitmq.route import TopicConfig
from orbitmq.v2.telemetry import TelemetryHub


@dataclass
class GrpcContextStub:
    timeout_s: float | None = 30.0
    client_id: str = "client-1"
    started: float = field(default_factory=time.monotonic)
    # what the handler wrote, in order; a write after ``ends_after_writes`` writes fails as a call the client
    # cancelled does (grpc cancels the handler's task)
    written: list[Any] = field(default_factory=list)
    ends_after_writes: int | None = None

    async def write(self, response: Any) -> None:
        if self.ends_after_writes is not None and len(self.written) >= self.ends_after_writes:
            raise asyncio.CancelledError
        self.written.append(response)

    def time_remaining(self) -> float | None:
        return None if self.timeout_s is None else self.timeout_s - (time.monotonic() - self.started)

    def invocation_metadata(self) -> list[tuple[str, str]]:
        return [("x-mq-client-id", self.client_id)]

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"


FAST_POP = PopConfig(
    minInvisibleTimeMillsForRecv=100,
    popClientGraceMs=0,
    popRenewIntervalMs=50,
    popJournalFlushIntervalMs=50,
    renewAheadTimeMillis=200,
)


class Core:
    """Start/stop the pieces the way ``BrokerController`` does, minus the network."""

    def __init__(self, root: Path, pop_config: PopConfig = FAST_POP) -> None:
        self.root = root
        self.pop_config = pop_config

    async def start(self) -> Core:
        loop = asyncio.get_running_loop()
        store_cfg = MessageStoreConfig(
            storePathRootDir=str(self.root),
            mappedFileSizeCommitLog=1 << 20,
            mappedFileSizeConsumeQueue=20 * 1000,
            flushIntervalCommitLog=50,
            warmMapedFileEnable=False,
            maxHashSlotNum=1000,
            maxIndexNum=4000,
        )
        self.store = DefaultMessageStore(store_cfg, ("127.0.0.1", 10911))
        self.store.load()
        topics = TopicConfigManager(self.root / "config" / "topics.json", 4, True)
        topics.load()
        groups = SubscriptionGroupManager(self.root / "config" / "subscriptionGroup.json", True)
        groups.load()
        offsets = ConsumerOffsetManager(self.root / "config" / "consumerOffset.json")
        offsets.load()
        long_polling = LongPollingService(loop, self.store)
        self.store.add_arriving_listener(long_polling.on_arrival)
        self.store.start()
        self.ctx = BrokerContext(
            config=BrokerConfig(),
            store=self.store,
            topics=topics,
            groups=groups,
            offsets=offsets,
            long_polling=long_polling,
            telemetry=TelemetryHub(),
            store_host=("127.0.0.1", 10911),
            loop=loop,
            plugins=BrokerPlugins.create(builtin_plugins(BrokerConfig(), self.root), load_entry_points=False),
        )
        self.pop = PopService(self.ctx, self.pop_config)
        self.receiver = ReceiveService(self.ctx, self.pop)  # the v2 RPCs, as the servicer calls them
        await self.pop.start()
        return self

    async def stop(self, clean: bool = True) -> None:
        if clean:
            await self.pop.shutdown()
        else:  # like SIGKILL for the pop state: no compaction, journal file just left as written
            if self.pop._task is not None:
                self.pop._task.cancel()
            self.pop.journal._stop.set()
        self.ctx.offsets.persist()
        self.store.shutdown()

    def topic(self, name: str, queues: int = 1) -> None:
        self.ctx.topics.create_or_update(TopicConfig(name, queues, queues))

    def group(self, name: str, *, retry_max_times: int = 16, orderly: bool = False) -> None:
        self.ctx.groups.create_or_update(
            SubscriptionGroupConfig(name, retry_max_times=retry_max_times, consume_message_orderly=orderly)
        )

    def put(self, topic: str, body: bytes, queue_id: int = 0, tag: str | None = None, msg_group: str | None = None):
        props = {mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"ID-{body.decode()}"}
        if tag:
            props[mc.PROPERTY_TAGS] = tag
        if msg_group:
            props[mc.PROPERTY_MESSAGE_GROUP] = msg_group
        result = self.store.put_message(MessageExtBrokerInner(topic, body, queue_id, props))
        assert result.ok, result
        return result


def receive_request(
    group: str,
    topic: str,
    *,
    batch: int = 32,
    invisible_ms: int | None = 10_000,
    auto_renew: bool = False,
    polling_s: float | None = 0,
    tag: str | None = None,
    queue_id: int = -1,
) -> service_pb2.ReceiveMessageRequest:
    req = service_pb2.ReceiveMessageRequest(
        group=definition_pb2.Resource(name=group),
        message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=queue_id),
        batch_size=batch,
        auto_renew=auto_renew,
    )
    if invisible_ms is not None:
        req.invisible_duration.CopyFrom(
            duration_pb2.Duration(seconds=invisible_ms // 1000, nanos=(invisible_ms % 1000) * 1_000_000)
        )
    if polling_s is not None:
        secs = int(polling_s)
        req.long_polling_timeout.CopyFrom(duration_pb2.Duration(seconds=secs, nanos=int((polling_s - secs) * 1e9)))
    if tag is not None:
        req.filter_expression.CopyFrom(definition_pb2.FilterExpression(type=definition_pb2.TAG, expression=tag))
    return req


async def receive(core: Core, req: service_pb2.ReceiveMessageRequest, ctx: GrpcContextStub | None = None):
    """(status, messages, the whole response list) of one ReceiveMessage stream."""
    ctx = ctx or GrpcContextStub()
    before = len(ctx.written)
    await core.receiver.receive(req, ctx)
    responses = ctx.written[before:]
    statuses = [r.status for r in responses if r.HasField("status")]
    messages = [r.message for r in responses if r.HasField("message")]
    assert len(statuses) == 1, responses
    assert responses[0].HasField("status") and responses[-1].HasField("delivery_timestamp")
    return statuses[0], messages, responses


def ack_request(group: str, topic: str, *handles: str) -> service_pb2.AckMessageRequest:
    return service_pb2.AckMessageRequest(
        group=definition_pb2.Resource(name=group),
        topic=definition_pb2.Resource(name=topic),
        entries=[service_pb2.AckMessageEntry(message_id=f"m{i}", receipt_handle=h) for i, h in enumerate(handles)],
    )


def change_request(
    group: str, topic: str, handle: str, invisible_ms: int
) -> service_pb2.ChangeInvisibleDurationRequest:
    return service_pb2.ChangeInvisibleDurationRequest(
        group=definition_pb2.Resource(name=group),
        topic=definition_pb2.Resource(name=topic),
        receipt_handle=handle,
        message_id="m",
        invisible_duration=duration_pb2.Duration(seconds=invisible_ms // 1000, nanos=(invisible_ms % 1000) * 1_000_000),
    )
