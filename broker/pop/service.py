"""The receive/ack state machine: pop (with long polling and attempt ids), ack, change invisibility, auto-renew,
redelivery and DLQ moves, per (group, topic, queue), journaled so it survives restarts.

The gRPC edge is ``broker/grpc/receive.py`` (v2) and ``broker/grpc/pop_batch.py`` (ReceiveBatch/AckBatch). Runs
on the broker's event loop; store reads are quick and made inline, store writes (DLQ) are awaited futures.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import repeat
from operator import attrgetter
from typing import NamedTuple

from broker.context import BrokerContext
from broker.pop.config import PopConfig, PopInitMode, pop_config_from
from broker.pop.dlq import DLQ_NUMS_PER_GROUP, dead_letter
from broker.pop.journal import PopJournal
from broker.pop.receipt import ReceiptHandle, ack_keys_for, check_scope, decode, decode_for
from broker.pop.state import Delivery, InFlight, PopState, QueueKey
from broker.store.message import MessageExt
from broker.store.results import GetMessageStatus, MessageFilter
from orbitmq import message_const as mc
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.route import READ_WRITE
from orbitmq.topics import dlq_topic
from orbitmq.v2.telemetry import ClientEvent, ClientInfo
from orbitmq.validation import validate_group, validate_topic

log = get_logger("broker.pop")

_HELD_BACK_RECHECK_S = 0.5
_EARLY_WAKE_SLACK_S = 0.05  # asyncio timers may fire this much early; a False sooner means shutdown
_ATTEMPT_CACHE_SIZE = 4096
_QUEUE_REPLACED = {
    GetMessageStatus.OFFSET_OVERFLOW_BADLY,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
}
_SEQ = attrgetter("seq")
_OFFSET = attrgetter("offset")
_MESSAGE_GROUP = attrgetter("message_group")
_SCANNABLE = {GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING}


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class PopRequest:
    """A validated receive: what to pop, for how long it stays invisible, how long to wait."""

    group: str
    topic: str
    queue_ids: list[int]
    batch: int
    invisible_ms: int
    auto_renew: bool
    tag_filter: MessageFilter | None
    fifo: bool
    max_attempts: int
    client_id: str
    polling_s: float
    attempt_id: str = ""


@dataclass
class PopStats:
    """Counters for the broker's stats log line."""

    delivered: int = 0
    redelivered: int = 0
    acked: int = 0
    nacked: int = 0
    dead_lettered: int = 0
    renewed: int = 0

    def snapshot(self) -> dict[str, int]:
        return dict(self.__dict__)


class Popped(NamedTuple):  # a tuple: one per popped message, built in C (``_new_popped``)
    delivery: Delivery
    message: MessageExt | None  # decoded when the pop needed it (redelivery, FIFO group), else read when answered


# Popped((delivery, message)) without a Python call per message (NamedTuple's __new__ and _make are Python code).
_new_popped: Callable[[tuple[Delivery, MessageExt | None]], Popped] = partial(tuple.__new__, Popped)


class PopService:
    """Pop state per (group, topic, queue), persisted by a journal under ``<storePathRootDir>/pop``."""

    def __init__(self, ctx: BrokerContext, config: PopConfig | None = None) -> None:
        self.ctx = ctx
        self.config = config or pop_config_from(ctx.config)
        self.journal = PopJournal(
            ctx.store.config.root / "pop",
            fsync_interval_ms=self.config.popJournalFlushIntervalMs,
            compact_bytes=self.config.popJournalCompactBytes,
        )
        self.state = PopState()
        self._round_robin: dict[tuple[str, str], int] = {}
        self._task: asyncio.Task[None] | None = None
        self._committed: dict[QueueKey, int] = {}
        # (client id, attempt id) -> what that receive handed out: a retried receive gets the same messages.
        self._attempts: OrderedDict[tuple[str, str], list[tuple[QueueKey, int, int]]] = OrderedDict()
        self.stats = PopStats()
        self._started_at = time.monotonic()

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        self._started_at = time.monotonic()
        self.journal.recover(self.state)
        self.state.sink = self.journal.append
        self.journal.start_sync_thread()
        for key in list(self.state.queues):
            self._sync_offset(key)
        inflight = sum(len(q.inflight) for q in self.state.queues.values())
        log.info(
            "pop state recovered",
            queues=len(self.state.queues),
            inflight=inflight,
            replayed=self.journal.records_replayed,
        )
        self.ctx.telemetry.on_client_change(self._on_client_change)
        self._task = asyncio.get_running_loop().create_task(self._housekeeping())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if not self.journal.opened:
            # a start that failed before recovery: compacting the empty state would replace the one on disk (and
            # the error raised doing it would hide the start's own)
            return
        try:
            self.journal.compact(self.state)
        finally:
            self.journal.close()

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(self.config.popRenewIntervalMs / 1000)
            try:
                self.renew(_now_ms())
                if self.journal.needs_compaction():
                    self.journal.compact(self.state)
            except Exception:
                log.exception("pop housekeeping failed")

    # ------------------------------------------------------------------ helpers
    def inflight_counts(self) -> dict[tuple[str, str], int]:
        """(group, topic) -> messages received, not yet acked nor visible again (the in-flight gauge)."""
        out: dict[tuple[str, str], int] = {}
        for (group, topic, _), qs in list(self.state.queues.items()):
            if qs.inflight:
                out[(group, topic)] = out.get((group, topic), 0) + len(qs.inflight)
        return out

    def _sync_offset(self, key: QueueKey) -> None:
        """Publish the lowest not-acked offset as the group's consumer offset (ConsumerProgress, offset tools)."""
        qs = self.state.queue(key)
        if qs is None or self._committed.get(key) == qs.ack_offset:
            return
        self._committed[key] = qs.ack_offset
        self.ctx.offsets.commit_offset(key[0], key[1], key[2], qs.ack_offset)

    def _visibility_changed(self, key: QueueKey) -> None:
        """Parked receives computed their wake-up from the old invisible times: let them look again."""
        self.ctx.long_polling.notify(key[1], key[2], None)

    def _client_alive(self, client_id: str) -> bool:
        if not client_id or self.ctx.telemetry.client(client_id) is not None:
            return True
        # Just after a restart clients have not heartbeated yet (every 10 s): do not release their messages.
        return (time.monotonic() - self._started_at) * 1000 < self.config.popClientGraceMs

    def _on_client_change(self, event: ClientEvent, client: ClientInfo) -> None:
        if event in (ClientEvent.UNREGISTERED, ClientEvent.EXPIRED):
            released = self.release_client(client.client_id, _now_ms())
            if released:
                log.info("released messages of a departed client", client_id=client.client_id, count=released)

    def release_client(self, client_id: str, now_ms: int) -> int:
        """A push consumer left: its auto-renewed messages become visible now instead of after a renewal."""
        count = 0
        for key, f in list(self.state.iter_inflight()):
            if f.auto_renew and f.client_id == client_id:
                self.state.change(key, f.offset, now_ms, 0, new_seq=False, auto_renew=False)
                count += 1
                self._visibility_changed(key)
        return count

    def renew(self, now_ms: int) -> int:
        """Auto-renew (push consumers, P19): extend invisible time shortly before it ends while the client lives."""
        renewed = 0
        for key, f in list(self.state.due(now_ms + self.config.renewAheadTimeMillis)):
            if not f.auto_renew:
                continue
            if now_ms >= f.renew_until_ms or not self._client_alive(f.client_id):
                # Client gone or held too long: let the message come back soon, as the reference does.
                self.state.change(
                    key, f.offset, now_ms, min(1000, max(0, f.visible_at_ms - now_ms)), new_seq=False, auto_renew=False
                )
                self._visibility_changed(key)
                continue
            self.state.change(
                key, f.offset, now_ms, self.config.defaultInvisibleTimeMills, new_seq=False, auto_renew=True
            )
            renewed += 1
            self.stats.renewed += 1
        return renewed

    # ------------------------------------------------------------------ pop
    def read_messages(self, popped: list[Popped]) -> list[tuple[Popped, MessageExt]]:
        """``popped`` with their messages read; one no longer in the CommitLog is dropped (acked, logged)."""
        read = self.ctx.store.look_message_by_offset
        out: list[tuple[Popped, MessageExt]] = []
        gone: list[Popped] = []
        for p in popped:
            msg = p.message
            if msg is None:
                f = p.delivery.flight
                msg = read(f.commitlog_offset, f.size, f.offset)
                if msg is None:
                    gone.append(p)
                    continue
            out.append((p, msg))
        if gone:
            self.drop_gone(gone)
        return out

    def drop_gone(self, popped: list[Popped]) -> None:
        """Ack popped messages whose records are gone (retention deleted the segment after the pop read the
        ConsumeQueue): they can never be delivered, and released they would only be popped again."""
        for p in popped:
            key, f = p.delivery.key, p.delivery.flight
            log.warning("popped message no longer in the CommitLog, dropped", key=key, offset=f.offset)
            qs = self.state.queue(key)
            if qs is not None and qs.inflight.get(f.offset) is f:
                self.state.ack(key, f.offset)
                self._sync_offset(key)

    def release(self, popped: list[Popped]) -> int:
        """Make popped-but-undelivered messages visible again now (their handles become stale)."""
        now_ms = _now_ms()
        released = 0
        for p in popped:
            key, f = p.delivery.key, p.delivery.flight
            qs = self.state.queue(key)
            if qs is None or qs.inflight.get(f.offset) is not f:
                continue
            self.state.change(key, f.offset, now_ms, 0, new_seq=True, auto_renew=False)
            self._visibility_changed(key)
            released += 1
        if released:
            log.info("released messages of an interrupted receive", count=released)
        return released

    def _replay_attempt(self, req: PopRequest) -> list[Popped]:
        """Messages a failed receive with this attempt id handed out that are still in flight under it."""
        if not req.attempt_id:
            return []
        previous = self._attempts.get((req.client_id, req.attempt_id), [])
        out: list[Popped] = []
        for key, offset, seq in previous:
            qs = self.state.queue(key)
            f = qs.inflight.get(offset) if qs is not None else None
            if f is None or f.seq != seq:
                continue
            msg = self.ctx.store.look_message_by_offset(f.commitlog_offset, f.size, f.offset)
            if msg is not None:
                out.append(Popped(Delivery(key, f), msg))
        return out

    def _remember_attempt(self, req: PopRequest, popped: list[Popped]) -> None:
        if not req.attempt_id or not popped:
            return
        self._attempts[(req.client_id, req.attempt_id)] = [
            (p.delivery.key, p.delivery.flight.offset, p.delivery.flight.seq) for p in popped
        ]
        while len(self._attempts) > _ATTEMPT_CACHE_SIZE:
            self._attempts.popitem(last=False)

    async def pop(self, req: PopRequest) -> list[Popped]:
        """Pop now, or long-poll until a message arrives / becomes visible again, or the polling time ends."""
        replayed = self._replay_attempt(req)
        if replayed:
            log.info("receive retried with the same attempt id, same messages again", count=len(replayed))
            return replayed
        popped = await self._pop_or_wait(req)
        self._remember_attempt(req, popped)
        return popped

    async def _pop_or_wait(self, req: PopRequest) -> list[Popped]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + req.polling_s
        keys = [(req.group, req.topic, q) for q in req.queue_ids]
        store = self.ctx.store
        while True:
            seen = {q: store.get_max_offset_in_queue(req.topic, q) for q in req.queue_ids}
            popped = await self._pop_once(req, _now_ms())
            left = deadline - loop.time()
            if popped or left <= 0:
                return popped
            nxt = self.state.next_visible_ms(keys)
            if nxt is not None:
                until = (nxt - _now_ms()) / 1000
                # Already visible but held back (FIFO): acks wake us; re-check now and then, never spin.
                left = min(left, until if until > 0 else _HELD_BACK_RECHECK_S)

            def arrived(seen: dict[int, int] = seen) -> bool:
                return any(store.get_max_offset_in_queue(req.topic, q) > o for q, o in seen.items())

            parked_at = loop.time()
            woken = await self.ctx.long_polling.wait(req.topic, None, None, left, ready=arrived)
            if not woken and loop.time() - parked_at < left - _EARLY_WAKE_SLACK_S:
                # False long before the timeout: the broker is shutting down and refuses waits without
                # suspending; looping on would spin the event loop and stall the shutdown.
                return popped

    async def _pop_once(self, req: PopRequest, now_ms: int) -> list[Popped]:
        n = len(req.queue_ids)
        rr_key = (req.group, req.topic)
        start = self._round_robin.get(rr_key, 0) % n
        self._round_robin[rr_key] = start + 1  # fairness: every receive starts at the next queue
        out: list[Popped] = []
        dead: list[tuple[QueueKey, InFlight, MessageExt]] = []
        for i in range(n):
            want = req.batch - len(out)
            if want <= 0:
                break
            out.extend(self._pop_queue(req, req.queue_ids[(start + i) % n], want, now_ms, dead))
        try:
            for key, f, msg in dead:
                await self._to_dlq(key, f, msg)
        except asyncio.CancelledError:
            self.release(out)
            raise
        return out

    def _init_offset(self, key: QueueKey) -> int:
        committed = self.ctx.offsets.query_offset(*key)
        if committed >= 0:
            return committed
        store = self.ctx.store
        if self.config.popInitMode == PopInitMode.MAX:
            return store.get_max_offset_in_queue(key[1], key[2])
        return store.get_min_offset_in_queue(key[1], key[2])

    def _pop_queue(
        self,
        req: PopRequest,
        queue_id: int,
        want: int,
        now_ms: int,
        dead: list[tuple[QueueKey, InFlight, MessageExt]],
    ) -> list[Popped]:
        key: QueueKey = (req.group, req.topic, queue_id)
        store = self.ctx.store
        state = self.state
        committed = self.ctx.offsets.query_offset(*key)
        known = self._committed.get(key)
        if known is not None and committed >= 0 and committed != known and state.queue(key) is not None:
            # Someone reset the group's offset (UpdateOffset / admin): restart the queue there, drop its flights.
            log.info("consumer offset reset, restarting pop state", key=key, offset=committed, was=known)
            state.drop(key)
            self._committed.pop(key, None)
        qs = state.queue(key) or state.init_queue(key, self._init_offset(key))
        min_offset = store.get_min_offset_in_queue(req.topic, queue_id)
        if qs.ack_offset < min_offset:
            state.reset(key, min_offset)  # retention removed what this group never consumed
        renew_until = now_ms + self.config.renewMaxTimeMillis if req.auto_renew else 0

        def flight(offset: int, cl: int, size: int, attempts: int, group: str | None) -> InFlight:
            return InFlight(
                offset,
                cl,
                size,
                state.next_seq(),
                attempts,
                now_ms,
                req.invisible_ms,
                group,
                req.auto_renew,
                renew_until,
                req.client_id,
            )

        flights: list[InFlight] = []
        messages: dict[int, MessageExt] = {}
        blocked = qs.blocked_groups(now_ms) if req.fifo else set()
        # 1) redeliveries: in-flight messages whose invisible time is over
        for f in qs.visible(now_ms):
            if req.fifo and f.message_group in blocked:
                continue
            if len(flights) >= want:
                if req.fifo and f.message_group:
                    blocked.add(f.message_group)  # waiting for redelivery: later ones of its group must wait
                continue
            msg = store.look_message_by_offset(f.commitlog_offset, f.size, f.offset)
            if msg is None:
                log.warning("in-flight message no longer in the CommitLog, dropped", key=key, offset=f.offset)
                state.ack(key, f.offset)
                continue
            if f.attempts >= req.max_attempts:
                # Hide it while the DLQ put runs so no concurrent receive redelivers it (P20).
                state.change(
                    key, f.offset, now_ms, self.config.defaultInvisibleTimeMills, new_seq=False, auto_renew=False
                )
                dead.append((key, f, msg))
                continue
            flights.append(flight(f.offset, f.commitlog_offset, f.size, f.attempts + 1, f.message_group))
            messages[f.offset] = msg
        redelivered = len(flights)  # the rest are first deliveries
        # 2) new messages from the pop offset on
        next_offset = qs.pop_offset
        room = want - len(flights)
        if room > 0 and len(qs.inflight) < self.config.popMaxInFlightPerQueue:
            res = store.get_message_spans(req.group, req.topic, queue_id, qs.pop_offset, room, req.tag_filter)
            if res.status == GetMessageStatus.OFFSET_TOO_SMALL:
                state.reset(key, res.next_begin_offset)
            elif res.status in _QUEUE_REPLACED and qs.pop_offset > res.max_offset and not flights:
                # The queue is shorter than what we handed out: the topic was deleted and created again.
                log.warning(
                    "pop offset beyond the queue end, restarting the queue",
                    key=key,
                    pop_offset=qs.pop_offset,
                    max_offset=res.max_offset,
                )
                state.drop(key)
                restart = res.max_offset if self.config.popInitMode == PopInitMode.MAX else res.min_offset
                state.init_queue(key, restart)
                self._committed.pop(key, None)
                self._sync_offset(key)
                return []
            elif res.status in _SCANNABLE and not req.fifo and res.spans:
                # No message groups to look at: the new flights are built from the spans' columns in one go.
                next_offset = res.next_begin_offset
                offsets, commitlog, sizes = zip(*res.spans, strict=True)
                flights.extend(
                    map(
                        InFlight,
                        offsets,
                        commitlog,
                        sizes,
                        state.next_seqs(len(offsets)),
                        repeat(1),
                        repeat(now_ms),
                        repeat(req.invisible_ms),
                        repeat(None),
                        repeat(req.auto_renew),
                        repeat(renew_until),
                        repeat(req.client_id),
                    )
                )
            elif res.status in _SCANNABLE:
                next_offset = res.next_begin_offset
                for queue_offset, phys, size in res.spans:
                    group = None
                    if req.fifo:  # the message group decides: read the message now
                        m = store.look_message_by_offset(phys, size, queue_offset)
                        if m is None:
                            continue  # gone (retention) or unreadable: skipped, as a read would skip it
                        messages[queue_offset] = m
                        group = m.properties.get(mc.PROPERTY_MESSAGE_GROUP)
                    if group and group in blocked:
                        next_offset = queue_offset  # FIFO: nothing of this group passes an earlier in-flight one
                        break
                    flights.append(flight(queue_offset, phys, size, 1, group))
        if not flights and next_offset == qs.pop_offset:
            self._sync_offset(key)
            return []
        deliveries = state.pop(key, flights, next_offset)
        self.stats.delivered += len(deliveries)
        self.stats.redelivered += redelivered if deliveries else 0
        self._sync_offset(key)
        found = map(messages.get, map(_OFFSET, flights)) if messages else repeat(None)
        return list(map(_new_popped, zip(deliveries, found, strict=False)))  # found may be endless

    async def _to_dlq(self, key: QueueKey, f: InFlight, msg: MessageExt) -> None:
        """Move a message to ``%DLQ%<group>`` and ack it; on a failed put it simply comes back later."""
        try:
            await self.send_to_dlq(key[0], msg, f.attempts)
        except Exception as exc:
            log.warning("DLQ put failed, message will be retried", key=key, offset=f.offset, error=repr(exc))
            return
        qs = self.state.queue(key)
        if qs is not None and f.offset in qs.inflight:
            self.state.ack(key, f.offset)
            self._sync_offset(key)
        log.info("message moved to DLQ", group=key[0], topic=key[1], queue=key[2], offset=f.offset, attempts=f.attempts)

    async def send_to_dlq(self, group: str, msg: MessageExt, attempts: int) -> None:
        topic = dlq_topic(group)
        self.ctx.topics.create_internal(topic, DLQ_NUMS_PER_GROUP, READ_WRITE)
        inner = dead_letter(group, msg, attempts, self.ctx.store_host)
        result = await self.ctx.store.put_message_aio(inner)
        if not result.ok:
            raise MQError(Code.INTERNAL_SERVER_ERROR, f"putting the message into {topic} failed: {result.status.name}")
        self.stats.dead_lettered += 1

    def current_handle(self, group: str, topic: str, queue_id: int, queue_offset: int) -> str | None:
        """The receipt handle of the message's current delivery, None when it is not in flight (remoting's ack names
        a message by queue and offset; its extraInfo carries only part of the handle)."""
        qs = self.state.queues.get((group, topic, queue_id))
        flight = qs.inflight.get(queue_offset) if qs is not None else None
        return None if flight is None else Delivery((group, topic, queue_id), flight).encoded_handle()

    # ------------------------------------------------------------------ ack
    def ack_handle(self, group: str, topic: str, receipt_handle: str) -> None:
        handle = decode(receipt_handle)
        check_scope(handle, group, topic)
        _, flight = self.state.check_handle(handle)
        key = (handle.group, handle.topic, handle.queue_id)
        self.state.ack(key, handle.queue_offset)
        self._sync_offset(key)
        self.stats.acked += 1
        if flight.message_group:
            self._visibility_changed(key)  # FIFO: the next message of this group may go now

    def ack_handles(self, group: str, topic: str, handles: Sequence[str]) -> dict[int, MQError]:
        """Ack each receipt handle; answers why for the ones that were not acked (by position).

        Checked one by one, recorded per queue: one journal record per queue instead of one per message."""
        validate_group(group)
        validate_topic(topic, allow_system=True)
        if not handles:
            raise MQError(Code.BAD_REQUEST, "receipt_handles is empty: an ack needs at least one receipt handle")
        keys = ack_keys_for(handles, group, topic)
        if keys is not None and self._ack_current(group, topic, keys):
            return {}
        failures: dict[int, MQError] = {}
        by_queue: dict[QueueKey, list[int]] = {}
        seen: set[tuple[QueueKey, int]] = set()
        fifo_queues: set[QueueKey] = set()
        for i, handle in enumerate(decode_for(handles, group, topic)):
            if isinstance(handle, MQError):
                failures[i] = handle
                continue
            try:
                key, offset, fifo = self._check_ack(handle, seen)
            except MQError as exc:
                failures[i] = exc
                continue
            seen.add((key, offset))
            by_queue.setdefault(key, []).append(offset)
            if fifo:
                fifo_queues.add(key)
        for key, offsets in by_queue.items():
            self.state.ack_many(key, offsets)
            self._sync_offset(key)
            self.stats.acked += len(offsets)
        for key in fifo_queues:
            self._visibility_changed(key)  # FIFO: the next message of these groups may go now
        return failures

    def _ack_current(self, group: str, topic: str, keys: list[tuple[int, int, int]]) -> bool:
        """Ack the lot when every (queue_id, queue_offset, seq) names one queue's current delivery, each once (what
        a consumer acking what it just received sends): checked as columns, with no object or check call per
        handle. False, with nothing changed, otherwise: the caller then checks them one by one to say which fail."""
        queue_ids, offsets, seqs = zip(*keys, strict=True)
        if queue_ids.count(queue_ids[0]) != len(queue_ids) or len(set(offsets)) != len(offsets):
            return False
        key = (group, topic, queue_ids[0])
        qs = self.state.queue(key)
        if qs is None:
            return False
        try:
            flights = list(map(qs.inflight.__getitem__, offsets))
        except KeyError:  # one of them is not in flight
            return False
        if tuple(map(_SEQ, flights)) != seqs:  # one of them was redelivered or changed since
            return False
        self.state.ack_many(key, list(offsets))
        self._sync_offset(key)
        self.stats.acked += len(offsets)
        if any(map(_MESSAGE_GROUP, flights)):
            self._visibility_changed(key)  # FIFO: the next message of these groups may go now
        return True

    def _check_ack(self, handle: ReceiptHandle, pending: set[tuple[QueueKey, int]]) -> tuple[QueueKey, int, bool]:
        """The queue and offset a handle acks, refused if not in flight or already acked earlier in the request."""
        _, flight = self.state.check_handle(handle)
        key = (handle.group, handle.topic, handle.queue_id)
        if (key, handle.queue_offset) in pending:
            raise MQError(
                Code.INVALID_RECEIPT_HANDLE,
                f"receipt handle of {handle.topic} queue {handle.queue_id} offset {handle.queue_offset} is acked "
                "twice in this request",
            )
        return key, handle.queue_offset, bool(flight.message_group)

    # ------------------------------------------------------------------ change invisible duration (nack)
    def change_handle(self, group: str, topic: str, receipt_handle: str, invisible_ms: int) -> str:
        cfg = self.config
        handle = decode(receipt_handle)
        check_scope(handle, group, topic)
        if not 0 <= invisible_ms <= cfg.maxInvisibleTimeMills:
            raise MQError(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"invisible_duration {invisible_ms} ms is outside [0, {cfg.maxInvisibleTimeMills}] ms",
            )
        self.state.check_handle(handle)
        key = (handle.group, handle.topic, handle.queue_id)
        flight = self.state.change(key, handle.queue_offset, _now_ms(), invisible_ms, new_seq=True, auto_renew=False)
        self.stats.nacked += 1
        self._visibility_changed(key)
        return Delivery(key, flight).encoded_handle()

    # ------------------------------------------------------------------ forward to the DLQ on request
    async def forward_handle(self, group: str, topic: str, receipt_handle: str) -> None:
        handle = decode(receipt_handle)
        check_scope(handle, group, topic)
        _, flight = self.state.check_handle(handle)
        key = (handle.group, handle.topic, handle.queue_id)
        msg = self.ctx.store.look_message_by_offset(flight.commitlog_offset, flight.size, flight.offset)
        if msg is None:
            self.state.ack(key, handle.queue_offset)
            self._sync_offset(key)
            raise MQError(Code.INVALID_RECEIPT_HANDLE, "the message of this receipt handle was removed by retention")
        # Keep the handle valid (same seq) but hidden while the put runs; the client retries with this handle.
        self.state.change(
            key, flight.offset, _now_ms(), self.config.defaultInvisibleTimeMills, new_seq=False, auto_renew=False
        )
        await self.send_to_dlq(group, msg, flight.attempts)
        self.state.check_handle(handle)
        self.state.ack(key, handle.queue_offset)
        self._sync_offset(key)
