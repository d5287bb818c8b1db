"""Transactional (half) messages: parked in ``RMQ_SYS_TRANS_HALF_TOPIC`` until EndTransaction, with orphan checks.

Commit re-puts the message into its real topic; commit and rollback both append an op record (the half
message's commitlog offset) to ``RMQ_SYS_TRANS_OP_HALF_TOPIC``, so the pending set is rebuilt at start by
replaying both topics. Unresolved halves older than the timeout are checked on a producer's Telemetry stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.grpc.convert import to_v2_message
from broker.store.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    MessageExt,
    MessageExtBrokerInner,
)
from broker.store.results import GetMessageStatus
from orbitmq import message_const as mc
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.msgid import decode_offset_message_id
from orbitmq.topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

if TYPE_CHECKING:
    from broker.store.message_store import DefaultMessageStore
    from orbitmq.v2.telemetry import ClientInfo, TelemetryHub

# Whether a client may be sent a check of a half message of this topic (it sees the whole message).
CheckGuard = Callable[["ClientInfo", str], bool]
# Another protocol's check-back (remoting's CHECK_TRANSACTION_STATE): given the parked half message, ask one of its
# producer group's connected clients; returns whether a client was asked.
RemoteChecker = Callable[[MessageExt], Awaitable[bool]]

SCAN_BATCH = 256
log = get_logger("broker.transaction")


@dataclass
class _Half:
    commitlog_offset: int
    size: int
    topic: str
    stored_ms: int
    checks: int = 0
    last_check_ms: int = 0


def to_half(msg: MessageExtBrokerInner) -> MessageExtBrokerInner:
    msg.properties[mc.PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[mc.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.topic, msg.queue_id = TRANS_HALF_TOPIC, 0
    return msg


def _real(msg: MessageExt) -> MessageExtBrokerInner:
    props = dict(msg.properties)
    topic = props.pop(mc.PROPERTY_REAL_TOPIC, msg.topic)
    queue_id = int(props.pop(mc.PROPERTY_REAL_QUEUE_ID, "0"))
    props.pop(mc.PROPERTY_TRANSACTION_PREPARED, None)
    return MessageExtBrokerInner(
        topic=topic,
        body=msg.body,
        queue_id=queue_id,
        properties=props,
        flag=msg.flag,
        sys_flag=(msg.sys_flag & ~TRANSACTION_PREPARED_TYPE) | TRANSACTION_COMMIT_TYPE,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
    )


def check_targets(
    clients: Iterable[ClientInfo], topic: str, producer_group: str, may_check: CheckGuard | None
) -> list[ClientInfo]:
    """Connected producers that declared ``topic`` in their (authorized) settings, may still publish to it and,
    when the message names its producer group, belong to that group."""
    return [
        c
        for c in clients
        if c.is_producer
        and c.connected
        and _publishes(c, topic)
        and (not producer_group or c.group == producer_group)
        and (may_check is None or may_check(c, topic))
    ]


def _publishes(client: ClientInfo, topic: str) -> bool:
    settings = client.settings
    return (
        settings is not None
        and settings.HasField("publishing")
        and any(t.name == topic for t in settings.publishing.topics)
    )


class TransactionService:
    """Loop-bound. ``timeout_ms``: age before the first check; ``max_checks``: then the half is rolled back."""

    def __init__(
        self,
        store: DefaultMessageStore,
        telemetry: TelemetryHub,
        timeout_ms: int,
        check_interval_ms: int,
        max_checks: int,
        may_check: CheckGuard | None = None,
        remote_checkers: list[RemoteChecker] | None = None,
    ) -> None:
        self._store = store
        self._may_check = may_check
        self._telemetry = telemetry
        self._timeout_ms = timeout_ms
        self._interval_s = check_interval_ms / 1000
        self._max_checks = max_checks
        # shared with the remoting listener (BrokerContext.transaction_checkers), which may register later
        self._remote_checkers = remote_checkers if remote_checkers is not None else []
        self._pending: dict[int, _Half] = {}
        self._task: asyncio.Task[None] | None = None
        # (topic, committed, when the half message was stored in ms): metrics
        self.on_end: Callable[[str, bool, int], None] | None = None

    def pending_by_topic(self) -> dict[str, int]:
        """Half messages waiting for their end, per topic (rocketmq_half_messages)."""
        out: dict[str, int] = {}
        for half in self._pending.values():
            out[half.topic] = out.get(half.topic, 0) + 1
        return out

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _scan(self, topic: str) -> list[MessageExt]:
        out: list[MessageExt] = []
        offset = self._store.get_min_offset_in_queue(topic, 0)
        while True:
            result = self._store.get_message("", topic, 0, offset, SCAN_BATCH)
            if result.status is GetMessageStatus.MESSAGE_CORRUPTED:  # reported by the store; skipped
                offset = result.next_begin_offset
                continue
            if not result.messages:
                return out
            out.extend(result.messages)
            offset = result.next_begin_offset

    def _load(self) -> None:
        resolved = {int(m.body) for m in self._scan(TRANS_OP_HALF_TOPIC) if m.body.isdigit()}
        for m in self._scan(TRANS_HALF_TOPIC):
            if m.commitlog_offset not in resolved:
                topic = m.properties.get(mc.PROPERTY_REAL_TOPIC, "")
                self._pending[m.commitlog_offset] = _Half(m.commitlog_offset, m.store_size, topic, m.store_timestamp)

    async def start(self) -> None:
        await asyncio.to_thread(self._load)
        log.info("transaction service started", pending=len(self._pending))
        self._task = asyncio.create_task(self._check_loop(), name="transaction-check")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def added(self, commitlog_offset: int, size: int, topic: str, stored_ms: int) -> None:
        self._pending[commitlog_offset] = _Half(commitlog_offset, size, topic, stored_ms)

    async def end(self, topic: str, transaction_id: str, commit: bool, source: str) -> None:
        """Commit or roll back; INVALID_TRANSACTION_ID for a blank, malformed, unknown or finished transaction."""
        if not transaction_id.strip():
            raise MQError(Code.INVALID_TRANSACTION_ID, "transaction_id is blank")
        phys = decode_offset_message_id(transaction_id).commitlog_offset
        half = self._pending.get(phys)
        if half is None:
            raise MQError(Code.INVALID_TRANSACTION_ID, f"transaction {transaction_id} is unknown or already ended")
        if half.topic != topic:
            raise MQError(Code.INVALID_TRANSACTION_ID, f"transaction {transaction_id} belongs to topic {half.topic!r}")
        await self._resolve(half, commit)
        log.info("transaction ended", topic=topic, commit=commit, source=source)

    async def end_at(
        self, commitlog_offset: int, commit: bool, source: str, producer_group: str, queue_offset: int
    ) -> str:
        """Remoting's END_TRANSACTION: the half at ``commitlog_offset``, checked as RocketMQ's EndTransactionProcessor
        does (the producer group that sent it, its queue offset in the half topic). Returns the real topic;
        INVALID_TRANSACTION_ID naming the mismatch otherwise."""
        half = self._pending.get(commitlog_offset)
        if half is None:
            raise MQError(
                Code.INVALID_TRANSACTION_ID,
                f"no prepared transaction message at commitLogOffset {commitlog_offset} (unknown or already ended)",
            )
        parked = self._store.look_message_by_offset(half.commitlog_offset, half.size)
        if parked is None:
            raise MQError(Code.INVALID_TRANSACTION_ID, f"the half message at {commitlog_offset} is no longer stored")
        stored_group = parked.properties.get(mc.PROPERTY_PRODUCER_GROUP, "")
        if stored_group and stored_group != producer_group:
            raise MQError(
                Code.INVALID_TRANSACTION_ID,
                f"producerGroup {producer_group!r} is not the group that sent it ({stored_group!r})",
            )
        if parked.queue_offset != queue_offset:
            raise MQError(
                Code.INVALID_TRANSACTION_ID,
                f"tranStateTableOffset {queue_offset} is not the half message's queue offset {parked.queue_offset}",
            )
        await self._resolve(half, commit)
        log.info("transaction ended", topic=half.topic, commit=commit, source=source)
        return half.topic

    async def _resolve(self, half: _Half, commit: bool) -> None:
        parked = self._store.look_message_by_offset(half.commitlog_offset, half.size)
        puts: list[MessageExtBrokerInner] = []
        if commit and parked is not None:
            puts.append(_real(parked))
        puts.append(
            MessageExtBrokerInner(topic=TRANS_OP_HALF_TOPIC, body=str(half.commitlog_offset).encode(), queue_id=0)
        )
        results = await self._store.put_messages_aio(puts)
        failed = [r for r in results if not r.ok]
        if failed:
            raise MQError(Code.INTERNAL_SERVER_ERROR, f"end transaction store failure: {failed[0].status.value}")
        self._pending.pop(half.commitlog_offset, None)
        if self.on_end is not None:
            self.on_end(half.topic, commit, half.stored_ms)

    async def _check_remotely(self, parked: MessageExt) -> bool:
        for checker in list(self._remote_checkers):
            try:
                if await checker(parked):
                    return True
            except Exception as exc:  # one protocol's failure must not stop the checks of the others
                log.exception("remote transaction check failed", error=repr(exc))
        return False

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.check_once()
            except Exception as exc:
                log.exception("transaction check failed", error=repr(exc))

    async def check_once(self) -> None:
        now_ms = int(time.time() * 1000)
        for half in list(self._pending.values()):
            if now_ms - half.stored_ms < self._timeout_ms or now_ms - half.last_check_ms < self._timeout_ms:
                continue
            if half.checks >= self._max_checks:
                log.warning("transaction never resolved, rolled back", topic=half.topic, checks=half.checks)
                await self._resolve(half, commit=False)
                continue
            parked = self._store.look_message_by_offset(half.commitlog_offset, half.size)
            if parked is None:
                self._pending.pop(half.commitlog_offset, None)
                continue
            producers = check_targets(
                self._telemetry.clients(client_type=definition_pb2.ClientType.PRODUCER),
                half.topic,
                parked.properties.get(mc.PROPERTY_PRODUCER_GROUP, ""),
                self._may_check,
            )
            half.last_check_ms = now_ms
            if not producers:
                # a 4.x producer of the group over remoting, if one is connected
                if await self._check_remotely(parked):
                    half.checks += 1
                continue  # no producer of that topic online: ask again later, without spending a check
            half.checks += 1
            message = to_v2_message(parked, topic=half.topic)
            command = service_pb2.TelemetryCommand(
                recover_orphaned_transaction_command=service_pb2.RecoverOrphanedTransactionCommand(
                    message=message, transaction_id=parked.msg_id
                )
            )
            target = producers[half.checks % len(producers)]
            self._telemetry.send_command(target.client_id, command)
