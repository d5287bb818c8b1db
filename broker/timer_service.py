"""Delay (timer) messages: parked in ``SCHEDULE_TOPIC_XXXX`` until their delivery time, then re-put to the real topic.

Messages with a delivery time park in queue 0; messages with a delay level (retries) in queue ``level - 1``, as
RocketMQ does. A heap of due times lives in memory and is rebuilt at start by scanning every schedule queue above
its persisted delivery floor (``config/timerProgress.json``); a crash between re-put and progress save may
deliver twice.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import heapq
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from broker.json_file import read_json, write_json_atomic
from broker.store.message import MessageExt, MessageExtBrokerInner
from broker.store.results import GetMessageStatus
from orbitmq import message_const as mc
from orbitmq.delay import clamp_level
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.topics import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from broker.store.message_store import DefaultMessageStore

SCHEDULE_QUEUE_ID = 0
SCAN_BATCH = 256
MAX_SLEEP_S = 1.0
log = get_logger("broker.timer")


@dataclass(order=True)
class _Due:
    deliver_ms: int
    queue_id: int
    queue_offset: int
    commitlog_offset: int = field(compare=False)
    size: int = field(compare=False)


def to_schedule(msg: MessageExtBrokerInner, schedule_queue_id: int = SCHEDULE_QUEUE_ID) -> MessageExtBrokerInner:
    """Redirect a delay message into a schedule queue, remembering where it belongs."""
    msg.properties[mc.PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[mc.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.topic, msg.queue_id = SCHEDULE_TOPIC, schedule_queue_id
    return msg


def to_delay_level(msg: MessageExtBrokerInner, level: int, levels: tuple[int, ...], now_ms: int) -> int:
    """Park ``msg`` at delay ``level`` (clamped to the ladder) in queue ``level - 1``; returns its delivery time."""
    level = clamp_level(level, levels)
    deliver_ms = now_ms + levels[level - 1]
    msg.properties[mc.PROPERTY_DELAY_TIME_LEVEL] = str(level)
    msg.properties[mc.PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    to_schedule(msg, level - 1)
    return deliver_ms


def from_schedule(msg: MessageExt) -> MessageExtBrokerInner:
    """The parked message as it is finally stored in its real topic (delivery time kept: it is a DELAY message)."""
    props = dict(msg.properties)
    if props.pop(mc.PROPERTY_DELAY_TIME_LEVEL, None) is not None:
        props.pop(mc.PROPERTY_TIMER_DELIVER_MS, None)  # a level's delay is served; the message is not a DELAY one
    topic = props.pop(mc.PROPERTY_REAL_TOPIC, msg.topic)
    queue_id = int(props.pop(mc.PROPERTY_REAL_QUEUE_ID, "0"))
    return MessageExtBrokerInner(
        topic=topic,
        body=msg.body,
        queue_id=queue_id,
        properties=props,
        flag=msg.flag,
        sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times,
    )


def deliver_ms_of(properties: dict[str, str]) -> int:
    raw = properties.get(mc.PROPERTY_TIMER_DELIVER_MS, "0")
    return int(raw) if raw.isdigit() else 0


class TimerService:
    """Loop-bound: ``add`` after a schedule put, ``start``/``shutdown`` from the controller."""

    def __init__(self, store: DefaultMessageStore, progress_path: Path) -> None:
        self._store = store
        self._path = progress_path
        self._heap: list[_Due] = []
        self._parked: set[tuple[int, int]] = set()  # (schedule queue, offset) still waiting (recall checks this)
        self._floor: dict[int, int] = {}  # per schedule queue: every offset below this was re-put
        self._delivered: dict[int, set[int]] = {}
        self._wake = asyncio.Event()
        self._save_lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        return len(self._parked)

    def _load(self) -> None:
        data = read_json(self._path) or {}
        if "queues" in data:
            queues = {int(q): v for q, v in data["queues"].items()}
        else:  # the single-queue format of earlier versions
            queues = {SCHEDULE_QUEUE_ID: {"floor": data.get("floor", 0), "delivered": data.get("delivered", [])}}
        for qid, progress in queues.items():
            self._floor[qid] = int(progress.get("floor", 0))
            self._delivered[qid] = {int(o) for o in progress.get("delivered", [])}
        for qid in self._store.queue_ids(SCHEDULE_TOPIC):
            delivered = self._delivered.setdefault(qid, set())
            offset = max(self._floor.setdefault(qid, 0), self._store.get_min_offset_in_queue(SCHEDULE_TOPIC, qid))
            while True:
                result = self._store.get_message("", SCHEDULE_TOPIC, qid, offset, SCAN_BATCH)
                if result.status is GetMessageStatus.MESSAGE_CORRUPTED:  # reported by the store; never delivered
                    offset = result.next_begin_offset
                    continue
                if not result.messages:
                    break
                for m in result.messages:
                    if m.queue_offset not in delivered:
                        self._parked.add((qid, m.queue_offset))
                        due = _Due(deliver_ms_of(m.properties), qid, m.queue_offset, m.commitlog_offset, m.store_size)
                        heapq.heappush(self._heap, due)
                offset = result.next_begin_offset

    def _snapshot(self) -> dict[str, object]:
        """Advance the floors and copy the progress (on the loop; only the file write leaves it)."""
        queues: dict[str, object] = {}
        for qid, delivered in self._delivered.items():
            floor = self._floor.get(qid, 0)
            while floor in delivered:
                delivered.discard(floor)
                floor += 1
            self._floor[qid] = floor
            queues[str(qid)] = {"floor": floor, "delivered": sorted(delivered)}
        return {"queues": queues}

    async def _persist(self) -> None:
        async with self._save_lock:  # one writer at a time: they share the temp file name
            await asyncio.to_thread(write_json_atomic, self._path, self._snapshot())

    async def start(self) -> None:
        await asyncio.to_thread(self._load)
        log.info("timer service started", pending=len(self._heap), floors=self._floor)
        self._task = asyncio.create_task(self._run(), name="timer")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._persist()

    def add(
        self, deliver_ms: int, queue_offset: int, commitlog_offset: int, size: int, queue_id: int = SCHEDULE_QUEUE_ID
    ) -> None:
        self._parked.add((queue_id, queue_offset))
        heapq.heappush(self._heap, _Due(deliver_ms, queue_id, queue_offset, commitlog_offset, size))
        self._wake.set()

    async def recall(self, queue_offset: int) -> bool:
        """Cancel a parked delivery-time message (queue 0); False when already delivered or never parked."""
        key = (SCHEDULE_QUEUE_ID, queue_offset)
        if key not in self._parked:
            return False
        self._parked.discard(key)
        self._delivered.setdefault(SCHEDULE_QUEUE_ID, set()).add(queue_offset)  # skipped when it comes due
        await self._persist()
        return True

    async def _run(self) -> None:
        while True:
            now_ms = int(time.time() * 1000)
            due: list[_Due] = []
            while self._heap and self._heap[0].deliver_ms <= now_ms:
                entry = heapq.heappop(self._heap)
                if (entry.queue_id, entry.queue_offset) in self._parked:  # not recalled
                    due.append(entry)
            if due:
                try:
                    await self._deliver(due)
                except Exception as exc:
                    log.exception("timer delivery failed, retrying", error=repr(exc))
                    for d in due:
                        self._parked.add((d.queue_id, d.queue_offset))
                        heapq.heappush(self._heap, d)
                    await asyncio.sleep(MAX_SLEEP_S)
                continue
            wait_s = MAX_SLEEP_S if not self._heap else min(MAX_SLEEP_S, (self._heap[0].deliver_ms - now_ms) / 1000)
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.001, wait_s))

    async def _deliver(self, due: list[_Due]) -> None:
        inners: list[MessageExtBrokerInner] = []
        offsets: list[tuple[int, int]] = []
        for d in due:
            parked = self._store.look_message_by_offset(d.commitlog_offset, d.size)
            self._parked.discard((d.queue_id, d.queue_offset))
            if parked is None:  # removed by retention: nothing left to deliver
                self._delivered.setdefault(d.queue_id, set()).add(d.queue_offset)
                continue
            inners.append(from_schedule(parked))
            offsets.append((d.queue_id, d.queue_offset))
        if inners:
            results = await self._store.put_messages_aio(inners)
            failed = [r for r in results if not r.ok]
            if failed:
                raise RuntimeError(f"re-put failed: {failed[0].status.value} {failed[0].error}")
        for qid, offset in offsets:
            self._delivered.setdefault(qid, set()).add(offset)
        await self._persist()


def encode_recall_handle(topic: str, broker_name: str, deliver_ms: int, message_id: str, queue_offset: int) -> str:
    """Opaque to clients; RocketMQ's "v1 topic broker time id" layout plus our schedule queue offset."""
    raw = f"v1 {topic} {broker_name} {deliver_ms} {message_id} {queue_offset}"
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_recall_handle(handle: str) -> tuple[str, str, int, str, int]:
    """(topic, broker, deliver_ms, message_id, queue_offset); BAD_REQUEST when the handle is malformed."""
    try:
        version, topic, broker, deliver_ms, message_id, offset = (
            base64.urlsafe_b64decode(handle.encode()).decode().split(" ")
        )
        if version != "v1":
            raise ValueError(version)
        return topic, broker, int(deliver_ms), message_id, int(offset)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MQError(Code.BAD_REQUEST, f"recall handle {handle!r} is malformed") from exc
