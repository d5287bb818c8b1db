"""The kombu transport behind ``broker_url="rocketmq://host:port"``: kombu queues on OrbitMQ topics, over ``oms``.

A kombu queue is a MIXED topic consumed by one group with receive/ack: a delivered message is invisible on the broker
and its receipt handle is the delivery tag. ETA/countdown become timer messages; bindings live in topic attributes.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import datetime as dt
import functools
import hashlib
import json
import logging
import math
import os
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from enum import Enum
from queue import Empty
from typing import Any, Final, Protocol, TypeVar

from kombu.transport import virtual
from kombu.transport.base import to_rabbitmq_queue_arguments
from kombu.utils.json import dumps as kombu_dumps
from kombu.utils.json import loads as kombu_loads

import oms
from oms.admin import ResourceManager
from oms.client.loop import LoopThread
from oms.consumer import PullConsumer
from oms.consumer.config import MAX_RECEIVE_BATCH, ConsumerKeys
from oms.errors import from_mq_error
from oms.producer.producer import Producer
from orbitmq.errors import MQError
from orbitmq.limits import DEFAULT_NAMESRV_PORT
from orbitmq.topics import dlq_topic
from orbitmq.validation import validate_body
from transports.celery.hub import HubFetcher
from transports.celery.options import (
    TransportOptions,
    bucket_of,
    bucket_topic,
    group_for_topic,
    topic_for_queue,
)
from transports.celery.timing import RECEIVE_LINGER_S, Retries, backoff_s

log = logging.getLogger("transports.celery")
T = TypeVar("T")

# User properties our transport adds to a stored message.
DUE_MS: Final = "kombu-due-ms"  # ETA (ms since the epoch) a timer message waits for
EXPIRES_MS: Final = "kombu-expires-ms"  # per-message TTL (AMQP ``expiration``) as an absolute time
ORIGIN_QUEUE: Final = "kombu-queue"
# Topic attributes: what a queue was declared with, and its bindings (one attribute each).
ATTR_QUEUE: Final = "kombu.queue"
ATTR_MAX_PRIORITY: Final = "kombu.max-priority"
ATTR_MESSAGE_TTL: Final = "kombu.message-ttl"
ATTR_EXPIRES: Final = "kombu.expires"
ATTR_TOUCHED: Final = "kombu.touched"
ATTR_BIND_PREFIX: Final = "kombu.bind."
MAX_TIMER_MS: Final = 24 * 3600 * 1000 - 60_000  # the broker's default maxDelayTimeMills is 24 h; hop beyond it
TIMER_MIN_AHEAD_MS: Final = 20  # an ETA closer than this is sent as a normal message
UNLIMITED_BUFFER: Final = 64  # what a channel without prefetch limit holds at most
FAR_FUTURE_MS: Final = 4_102_444_800_000  # 2100-01-01: "the queue's end" for a purge
SETTLE_BATCH: Final = 256
ACK_LINGER_S: Final = 0.02  # an ack waits this long for others to share its AckBatch call (the credit is free at once)
SEND_BATCH: Final = 128  # messages per send request
# A publish that comes this long after the one before, with nothing in flight, is sent and answered on the caller's
# thread: no hand-off to the client's loop thread on the way out (a burst still goes asynchronously, in batches).
IDLE_PUBLISH_S: Final = 0.002
# Send failures that sending again cannot cure: the message or the credentials were refused.
PERMANENT_SEND_ERRORS: Final = (oms.OMSMessageFormatException, oms.OMSSecurityException, oms.OMSNotSupportedException)


class BrokerUnreachable(ConnectionError):
    """No OrbitMQ name server or broker answered at the URL's address."""


class PublishFailed(ConnectionError):
    """A send still in flight when ``basic_publish`` returned failed on the broker (raised by the next publish)."""


class Settle(Enum):
    """What happens to a held message."""

    ACK = "ack"
    REQUEUE = "requeue"  # visible again at once
    DEAD_LETTER = "dead-letter"  # copied to %DLQ%<group>, then acked
    RENEW = "renew"  # invisible for another invisible_time


@dataclass
class Held:
    """A received message the broker keeps invisible for us: buffered, or handed to kombu and not yet settled."""

    consumer: PullConsumer
    message: oms.BytesMessage
    queue: str
    group: str
    renew_at: float  # time.monotonic() when the renewer extends its invisibility
    channel: RocketMQChannel | None = None


SettleOp = tuple[Settle, Held, threading.Event | None]  # what, which message, set once done (or None)


@dataclass(frozen=True)
class QueueMeta:
    """What a queue was declared with, as stored in its topic's attributes."""

    queue: str
    topic: str
    max_priority: int = 0
    message_ttl_ms: int = 0
    expires_ms: int = 0

    def topics(self, steps: tuple[int, ...]) -> list[str]:
        """Bucket topics, highest priority first (just the queue's topic without priorities)."""
        if not self.max_priority:
            return [self.topic]
        return [bucket_topic(self.topic, s) for s in sorted(steps, reverse=True) if s <= self.max_priority]


@dataclass(frozen=True)
class Binding:
    exchange: str
    exchange_type: str
    routing_key: str
    pattern: str
    queue: str

    def attribute(self) -> tuple[str, str]:
        key = json.dumps([self.exchange, self.routing_key, self.pattern], separators=(",", ":"))
        digest = hashlib.sha1(key.encode("utf-8")).hexdigest()[:16]
        value = json.dumps(
            {"e": self.exchange, "t": self.exchange_type, "r": self.routing_key, "p": self.pattern},
            separators=(",", ":"),
        )
        return ATTR_BIND_PREFIX + digest, value


def _queue_args(kwargs: dict[str, Any]) -> dict[str, Any]:
    return dict(kwargs.get("arguments") or {})


def _envelope(raw: str) -> dict[str, Any]:
    """A stored kombu message. kombu's decoder runs an object hook on every dict (and builds a decoder per call)
    to restore the values its encoder tagged with ``__type__`` (datetime, UUID, bytes...); without such a tag the
    plain decoder gives the same result, several times faster."""
    return kombu_loads(raw) if "__type__" in raw else json.loads(raw)


def _eta_ms(headers: dict[str, Any]) -> int | None:
    """Celery protocol 2 puts the ETA in ``headers['eta']`` (ISO 8601); naive times are UTC (``enable_utc``)."""
    raw = headers.get("eta")
    if not raw:
        return None
    try:
        when = dt.datetime.fromisoformat(str(raw))
    except ValueError:
        log.warning("eta header %r is not ISO 8601; the message is sent without a delay", raw)
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


class QoS(virtual.QoS):
    """kombu's prefetch ledger; settling goes to the broker (ack, visible again, dead letter)."""

    channel: RocketMQChannel

    # kombu's ledger first, then the broker: settling frees the credit a waiting fetcher is woken for.
    def ack(self, delivery_tag: str) -> None:
        super().ack(delivery_tag)
        self.channel._settle(delivery_tag, Settle.ACK)

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        self._quick_ack(delivery_tag)
        self.channel._settle(delivery_tag, Settle.REQUEUE if requeue else Settle.DEAD_LETTER)

    def restore_unacked(self) -> list[Any]:
        """Warm shutdown: every held message becomes visible again at once; nothing to re-publish."""
        self._flush()
        self._delivered.clear()
        if self.channel.connection is not None and not self.channel.connection._forked():
            self.channel._release_all()
        return []


class RocketMQChannel(virtual.Channel):
    """One kombu channel: storage primitives on topics, consumers fed by background long polls."""

    QoS = QoS
    supports_fanout = True
    do_restore = True
    connection: Transport

    def __init__(self, connection: Transport, **kwargs: Any) -> None:
        super().__init__(connection, **kwargs)
        self._lock = threading.Lock()  # the ledger below: the worker's thread settles, the I/O loop receives
        self._held: dict[str, Held] = {}  # delivery tag (first receipt handle) -> message
        self._credit_waiters: set[Waiter] = set()  # fetchers (one per consumed queue) waiting for credit
        self._settle_waiters: set[Waiter] = set()  # fetchers waiting for a hand-over (hub.py, _await_hand_over)
        self._buffered = 0  # received, not yet handed to kombu
        self._reserved = 0  # receives in flight may bring this many
        self._fetchers: dict[str, Fetcher | HubFetcher] = {}
        self._no_ack: set[str] = set()

    # -- storage primitives ------------------------------------------------------------------------------------

    def prepare_queue_arguments(self, arguments: dict[str, Any] | None, **kwargs: Any) -> dict[str, Any]:
        """``Queue(expires=, message_ttl=, max_priority=)`` as x-arguments, as for RabbitMQ (kombu's default drops
        them for virtual transports)."""
        return dict(to_rabbitmq_queue_arguments(arguments or {}, **kwargs))

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        self.connection._declare(queue, _queue_args(kwargs), bool(kwargs.get("auto_delete")))

    def _has_queue(self, queue: str, **kwargs: Any) -> bool:
        return self.connection._queue_meta(queue, create=False) is not None

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        self.connection._publish(queue, message)

    def _put_fanout(self, exchange: str, message: dict[str, Any], routing_key: str, **kwargs: Any) -> None:
        for queue in sorted({b.queue for b in self.connection._bindings(exchange, fresh=True)}):
            self._put(queue, message)

    def _queue_bind(self, exchange: str, routing_key: str, pattern: str, queue: str) -> None:
        exchange_type = self.state.exchanges.get(exchange, {}).get("type", "direct")
        self.connection._bind(Binding(exchange, exchange_type, routing_key, pattern or "", queue))

    def get_table(self, exchange: str) -> list[tuple[str, str, str]]:
        local = list(self.state.exchanges[exchange]["table"]) if exchange in self.state.exchanges else []
        remote = [(b.routing_key, b.pattern, b.queue) for b in self.connection._bindings(exchange)]
        return list(dict.fromkeys([*local, *remote]))

    def typeof(self, exchange: str, default: str = "direct") -> Any:
        if exchange in self.state.exchanges:
            return super().typeof(exchange, default)
        for b in self.connection._bindings(exchange):
            return self.exchange_types[b.exchange_type]
        return self.exchange_types[default]

    def _lookup(self, exchange: str, routing_key: str, default: str | None = None) -> list[str]:
        found: list[str] = super()._lookup(exchange, routing_key, default)
        if not found and exchange:  # a binding made moments ago in another process: read the table again
            self.connection._bindings(exchange, fresh=True)
            found = super()._lookup(exchange, routing_key, default)
        return found

    def _get(self, queue: str, timeout: float | None = None) -> dict[str, Any]:
        got = self.connection._receive(self, queue, 1, 0.0)
        if not got:
            raise Empty()
        return got[0]

    def _size(self, queue: str) -> int:
        return self.connection._size(queue)

    def _purge(self, queue: str) -> int:
        return self.connection._purge(queue)

    def _delete(self, queue: str, *args: Any, **kwargs: Any) -> None:
        self.connection._delete_queue(queue)

    def queue_delete(self, queue: str, if_unused: bool = False, if_empty: bool = False, **kwargs: Any) -> None:
        if if_empty and self._size(queue):
            return
        self.state.queue_bindings_delete(queue)
        self.connection._delete_queue(queue)

    # -- consuming ---------------------------------------------------------------------------------------------

    def basic_consume(
        self, queue: str, no_ack: bool, callback: Callable[..., Any], consumer_tag: str, **kw: Any
    ) -> Any:
        result = super().basic_consume(queue, no_ack, callback, consumer_tag, **kw)
        if no_ack:
            self._no_ack.add(queue)
        if queue not in self._fetchers:
            hub = self.connection._hub_here()
            fetcher = Fetcher(self, queue) if hub is None else HubFetcher(self, queue, hub)
            self._fetchers[queue] = fetcher
            fetcher.start()
        return result

    def basic_cancel(self, consumer_tag: str) -> Any:
        queue = self._tag_to_queue.get(consumer_tag)
        result = super().basic_cancel(consumer_tag)
        if queue is not None and queue not in self._active_queues:
            fetcher = self._fetchers.pop(queue, None)
            if fetcher is not None:
                fetcher.stop()
            self._no_ack.discard(queue)
        return result

    def basic_get(self, queue: str, no_ack: bool = False, **kwargs: Any) -> Any:
        message = super().basic_get(queue, no_ack, **kwargs)
        if message is not None and no_ack:
            self._settle(message.delivery_tag, Settle.ACK)
        return message

    def basic_qos(self, prefetch_size: int = 0, prefetch_count: int = 0, apply_global: bool = False) -> None:
        super().basic_qos(prefetch_size, prefetch_count, apply_global)
        self._wake()

    def _restore(self, message: Any) -> None:
        self._settle(message.delivery_tag, Settle.REQUEUE)

    def close(self) -> None:
        if self.connection is not None and not self.connection._forked():
            for fetcher in list(self._fetchers.values()):
                fetcher.stop()
            self._release_all()
        elif self._qos is not None:
            self._qos.restore_at_shutdown = False  # a forked child's copy: the parent still holds these messages
        super().close()

    # -- the held ledger ----------------------------------------------------------------------------------------

    def _wake(self) -> None:
        """Credit may have changed (prefetch, release, a fetcher stopping): wake a waiting fetcher to look again."""
        with self._lock:
            waiters, self._credit_waiters = self._credit_waiters, set()
        for waiter in waiters:
            waiter.wake()

    def _credits(self) -> int:
        """How many more messages this channel may hold (kombu's prefetch minus what is held or coming)."""
        qos = self.qos
        unsettled = len(qos._delivered) - len(qos._dirty)
        limit = qos.prefetch_count or UNLIMITED_BUFFER
        return limit - unsettled - self._buffered - self._reserved

    def _take_credits(self, want: int, linger_over: bool, waiter: Waiter) -> int:
        """Take up to ``want`` credits for a receive, or 0 and leave ``waiter`` to be woken when worth it.

        Credits come back one task at a time: with fewer than half the prefetch free, a receive waits (up to
        RECEIVE_LINGER_S, ``linger_over`` once it passed) for more, so one receive brings several tasks. The waiter
        is woken by the thread that frees credit, only when it reaches what the fetcher waits for."""
        with self._lock:
            n = min(want, self._credits())
            enough = min(want, max(1, self.qos.prefetch_count // 2))
            if n >= enough or (n > 0 and linger_over):
                self._reserved += n
                return n
            waiter.need = enough if n > 0 else 1
            self._credit_waiters.add(waiter)
            return 0

    def _await_settle(self, waiter: Waiter) -> None:
        """Wake ``waiter`` at the next settle of a message of this channel (an ack: a task was handed over)."""
        with self._lock:
            self._settle_waiters.add(waiter)

    def _credit_freed(self) -> list[Waiter]:
        """Called after kombu's ledger freed a credit (with ``self._lock`` held): the waiters to wake, once the
        caller released the lock (a fetcher on the worker's hub polls at once, and takes the lock)."""
        if not self._credit_waiters:
            return []
        credits = self._credits()
        woken = [w for w in self._credit_waiters if credits >= w.need]
        self._credit_waiters.difference_update(woken)
        return woken

    def _received(self, reserved: int, held: list[Held], buffered: bool) -> None:
        woken: list[Waiter] = []
        with self._lock:
            self._reserved -= reserved
            for h in held:
                h.channel = self
                self._held[h.message.receipt_handle or ""] = h
            if buffered:
                self._buffered += len(held)
            if len(held) < reserved:
                woken = self._credit_freed()  # credit reserved and not used: a fetcher of another queue may take it
        for waiter in woken:
            waiter.wake()

    def _handed_over(self, count: int = 1) -> None:
        with self._lock:
            self._buffered -= count

    def _give_back(self, payloads: list[dict[str, Any]]) -> None:
        """Received and not handed to kombu (the consumer was cancelled meanwhile, or a callback raised before their
        turn): visible again at once, unless the channel closed meanwhile and released what it held."""
        if self.connection is None:
            return
        self._handed_over(len(payloads))
        for payload in payloads:
            self._settle(payload["properties"]["delivery_tag"], Settle.REQUEUE)

    def _settle(self, delivery_tag: str, how: Settle) -> None:
        with self._lock:
            held = self._held.pop(delivery_tag, None)
            woken = self._credit_freed()
            if self._settle_waiters:
                woken = list(self._settle_waiters.union(woken))
                self._settle_waiters.clear()
        for waiter in woken:
            waiter.wake()
        if held is None:
            log.debug("delivery tag %.24s... is not held (settled already)", delivery_tag)
            return
        self.connection._settler.submit(how, held)

    def _release_all(self) -> None:
        """Make everything this channel holds visible again (warm shutdown, channel close)."""
        with self._lock:
            held = list(self._held.values())
            self._held.clear()
            self._buffered = 0
        self._wake()
        if held:
            log.info("making %d held message(s) visible again", len(held))
            self.connection._settler.settle_now(Settle.REQUEUE, held)

    def _due_for_renewal(self, now: float) -> list[Held]:
        with self._lock:
            return [h for h in self._held.values() if h.renew_at <= now]


class Waiter(Protocol):
    """What a fetcher waiting for its channel's credit gives ``_take_credits``: how much it waits for, and how to
    wake it (from any thread, without the channel's lock held)."""

    need: int

    def wake(self) -> None: ...


class CreditWaiter:
    """A fetcher waiting on the I/O loop for its channel's credit; woken from any thread, at most once per wait."""

    def __init__(self, io: LoopThread) -> None:
        self.io = io
        self.need = 1
        self.event = asyncio.Event()  # used on the I/O loop only

    def wake(self) -> None:
        if self.io.in_loop():
            self.event.set()
        else:
            self.io.call_soon(self.event.set)


class Fetcher:
    """Long-polls one queue for its channel while the channel has credit (a task on the transport's I/O loop)."""

    def __init__(self, channel: RocketMQChannel, queue: str) -> None:
        self.channel = channel
        self.queue = queue
        self._stopping = False
        self._future: concurrent.futures.Future[None] | None = None

    def start(self) -> None:
        transport = self.channel.connection
        io = transport._io_loop()
        # the queue's metadata and consumers now, on this thread: the loop then receives without admin calls
        meta = transport._queue_meta(self.queue)
        assert meta is not None
        for topic in meta.topics(transport.options.priority_steps):
            transport._consumer(topic)
        self._future = transport._start_task(self._run(io))

    def stop(self) -> None:
        """The fetcher ends after the receive in flight, if any (what it brings becomes visible again at once)."""
        self._stopping = True
        self.channel._wake()

    async def _credits(self, waiter: CreditWaiter) -> int:
        linger_until: float | None = None
        while not self._stopping:
            now = time.monotonic()
            over = linger_until is not None and now >= linger_until
            waiter.event.clear()
            n = self.channel._take_credits(MAX_RECEIVE_BATCH, over, waiter)
            if n:
                return n
            if waiter.need > 1 and linger_until is None:
                linger_until = now + RECEIVE_LINGER_S  # some credit is free: wait a little for more
            wait_s = 1.0 if linger_until is None else max(0.0, linger_until - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter.event.wait(), wait_s)
        return 0

    async def _run(self, io: LoopThread) -> None:
        channel = self.channel
        transport = channel.connection
        waiter = CreditWaiter(io)
        failures = 0
        while not self._stopping:
            reserved = await self._credits(waiter)
            if not reserved:
                continue
            try:
                payloads = await transport._receive_async(
                    channel, self.queue, reserved, transport.options.polling_timeout
                )
                failures = 0
            except Exception as exc:  # the broker may be restarting: keep polling with backoff
                if self._stopping:
                    return  # the connection is closing: this receive was cut short on purpose
                delay = backoff_s(failures)
                failures += 1
                log.warning("receive from %s failed (%s); retrying in %.2fs", self.queue, exc, delay)
                await asyncio.sleep(delay)
                continue
            if payloads and self._stopping:  # received while the consumer was cancelled: visible again at once
                channel._give_back(payloads)
                return
            elif payloads:
                transport._ready_for(channel, self.queue, payloads)


class Settler:
    """Settles held messages on the transport's I/O loop: acks, requeues, dead letters and renewals, many in flight at
    once, acks of many messages in one call. A settle costs the thread that asks for it a lock and a list append; the
    loop is woken only when the settler sits idle.

    Ops on one message never overlap (batches run one after the other): a renewal changes the receipt handle that the
    next op must use.
    """

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.io: LoopThread | None = None  # the access point's loop, from start()
        self._ops: deque[SettleOp] = deque()
        self._lock = threading.Lock()
        self._idle = False  # the settler waits for ops: whoever adds one wakes it
        self._stopping = False
        self._wakeup = asyncio.Event()  # set on the I/O loop only
        self._done: concurrent.futures.Future[None] | None = None

    def start(self, io: LoopThread) -> None:
        self.io = io
        self._done = self.transport._start_task(self._run())

    def submit(self, how: Settle, held: Held) -> None:
        self._put([(how, held, None)])

    def _put(self, ops: list[SettleOp]) -> None:
        with self._lock:
            self._ops.extend(ops)
            wake, self._idle = self._idle, False
        if wake and self.io is not None:
            self.io.call_soon(self._wakeup.set)

    def settle_now(self, how: Settle, held: list[Held], timeout: float = 10.0) -> None:
        events = [threading.Event() for _ in held]
        self._put([(how, h, event) for h, event in zip(held, events, strict=True)])
        deadline = time.monotonic() + timeout
        for event in events:
            if not event.wait(max(0.0, deadline - time.monotonic())):
                log.warning("settling %d message(s) did not finish within %.1fs", len(held), timeout)
                return

    def stop(self, timeout: float = 10.0) -> None:
        """Settle what is queued (bounded by ``timeout``), then end."""
        with self._lock:
            self._stopping = True
            wake, self._idle = self._idle, False
        if wake and self.io is not None:
            self.io.call_soon(self._wakeup.set)
        if self._done is not None and self.io is not None and not self.io.in_loop():
            with contextlib.suppress(concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                self._done.result(timeout)

    async def _run(self) -> None:
        while True:
            with self._lock:
                wait = not self._ops
                if wait:
                    if self._stopping:
                        return
                    self._idle = True
                    self._wakeup.clear()
            if wait:
                await self._wakeup.wait()
                continue
            first = self._ops[0]
            if first[0] is Settle.ACK and first[2] is None and not self._stopping:
                await asyncio.sleep(ACK_LINGER_S)  # acks that come meanwhile share the call (the credit is free)
            with self._lock:
                batch = [self._ops.popleft() for _ in range(min(len(self._ops), SETTLE_BATCH))]
            await self._settle(batch)

    async def _settle(self, batch: list[SettleOp]) -> None:
        final: dict[int, tuple[Settle, Held, list[threading.Event]]] = {}
        for how, held, event in batch:
            key = id(held)
            prev = final.get(key)
            events = ([event] if event else []) + (prev[2] if prev else [])
            if prev is not None and how is Settle.RENEW:
                how = prev[0]  # a renewal never overrides an ack or a requeue of the same message
            final[key] = (how, held, events)
        acks: dict[int, list[Held]] = {}  # consumer -> its messages to ack, one call for all of them
        others = []
        for how, held, _ in final.values():
            if how is Settle.ACK:
                acks.setdefault(id(held.consumer), []).append(held)
            else:
                others.append(self._one(how, held))
        await asyncio.gather(*others, *(self._ack(group) for group in acks.values()))
        for _, _, events in final.values():
            for event in events:
                event.set()

    async def _ack(self, held: list[Held]) -> None:
        refused = await self._until_visible(
            held, "ack", lambda: held[0].consumer.aio().ack_batch([h.message for h in held])
        )
        for _, why in refused or ():
            log.warning("ack of a message of %s refused: %s", held[0].queue, why)

    async def _until_visible(self, held: list[Held], what: str, call: Callable[[], Coroutine[Any, Any, T]]) -> T | None:
        """``call()`` settling ``held``; None when it failed. One the broker could not take (restarting: a connection
        error) is made again with backoff until the first of them would be visible again (receipt handles outlive
        a broker restart, and a late one is refused anyway): dropped, an ack's tasks would run a second time, a
        requeue's would wait out their invisible time."""
        retries = Retries(min(h.renew_at for h in held) + self.transport._renew_after_s)  # last renewal + invisible
        while True:
            try:
                return await call()
            except oms.OMSConnectionException as exc:
                wait = retries.next_wait()
                if wait is None:
                    log.warning(
                        "%s of %d message(s) of %s failed (%s): visible again after the invisible time",
                        what,
                        len(held),
                        held[0].queue,
                        exc,
                    )
                    return None
                if retries.failures == 1:
                    log.warning(
                        "%s of %d message(s) of %s failed (%s); trying again", what, len(held), held[0].queue, exc
                    )
                await asyncio.sleep(wait)
            except Exception as exc:  # the broker makes them visible again after the invisible time: nothing is lost
                log.warning("%s of %d message(s) of %s failed: %s", what, len(held), held[0].queue, exc)
                return None

    async def _one(self, how: Settle, held: Held) -> None:
        aio = held.consumer.aio()
        if how is Settle.REQUEUE:
            await self._until_visible([held], "requeue", lambda: aio.change_invisible_duration(held.message, 0))
            return
        try:
            if how is Settle.RENEW:
                await aio.change_invisible_duration(held.message, self.transport._invisible_ms)
                held.renew_at = time.monotonic() + self.transport._renew_after_s
            else:  # dead letter: not made again (a copy already sent to the DLQ would be sent twice)
                await self.transport._dead_letter(held)
                await aio.ack(held.message)
        except Exception as exc:  # the broker makes it visible again after the invisible time: nothing is lost
            log.warning("%s of a message of %s failed: %s", how.value, held.queue, exc)


class Sender:
    """One thread sends what publishes queued, many messages per request, at most ``publish_window`` waiting."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._pending: deque[oms.BytesMessage] = deque()
        self._busy = 0  # messages taken by the thread and not answered yet
        self._direct = 0  # messages sent by publishers themselves, not answered yet
        self._last_submit = 0.0  # time.monotonic() of the last publish
        self._cond = threading.Condition()
        self._stopping = False
        self._stop_deadline: float | None = None  # time.monotonic() when stop() stops waiting for the queue
        self._exited = False  # the thread has ended (stopped with nothing queued): nothing queued now is sent
        self._thread = threading.Thread(target=self._run, name="rocketmq-send", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, message: oms.BytesMessage) -> None:
        t = self.transport
        window = t.options.publish_window
        with self._cond:
            deadline = time.monotonic() + t.options.operation_timeout * 2
            while len(self._pending) + self._busy + self._direct >= window:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PublishFailed(f"{window} sends waited over {t.options.operation_timeout * 2:.1f}s")
                self._cond.wait(left)
            # Nothing on its way: send from here (no hand-over to the thread, the lowest latency); else queue it
            # behind what is on its way, and the thread sends the queue in one request.
            now = time.monotonic()
            direct = not self._pending and not self._busy and not self._direct
            idle, self._last_submit = now - self._last_submit >= IDLE_PUBLISH_S, now
            if not direct:
                self._pending.append(message)
                self._cond.notify_all()
                return
            self._direct += 1
        try:
            _, producer, _ = t._clients()
            if idle:  # a lone publish: written and answered on this thread (its failure raises here)
                producer.send(message)
                self._done_direct()
                return
            producer.send_async(message).add_listener(functools.partial(self._direct_sent, message))
        except BaseException:
            self._done_direct()
            raise

    def _direct_sent(self, message: oms.BytesMessage, future: oms.Future[Any]) -> None:
        error = future.get_throwable()
        if error is not None and not isinstance(error, PERMANENT_SEND_ERRORS):
            with self._cond:  # the thread sends it again (with what queued behind it), as a failed batch
                if not self._exited:
                    self._pending.appendleft(message)
                    self._direct -= 1
                    self._cond.notify_all()
                    return
        if error is not None:
            self.transport._on_batch_failed(error, 1)
        self._done_direct()

    def _done_direct(self) -> None:
        with self._cond:
            self._direct -= 1
            self._cond.notify_all()

    def stop(self, timeout: float) -> None:
        """Send what is queued (bounded by ``timeout``), then end the thread."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._stopping = True
            self._stop_deadline = deadline  # a batch being sent again gives up then
            self._cond.notify_all()
        self.flush(timeout)
        self._thread.join(max(0.0, deadline - time.monotonic()))

    def flush(self, timeout: float) -> None:
        """Wait until what was queued has been answered (bounded by ``timeout``)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._busy or self._direct:
                left = deadline - time.monotonic()
                if left <= 0:
                    log.warning("%d message(s) still unsent", len(self._pending) + self._busy + self._direct)
                    return
                self._cond.wait(left)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopping:
                    self._cond.wait()
                if not self._pending:
                    self._exited = True
                    return
                batch = [self._pending.popleft() for _ in range(min(len(self._pending), SEND_BATCH))]
                self._busy = len(batch)
            self._send_batch(batch)
            with self._cond:
                self._busy = 0
                self._cond.notify_all()

    def _send_batch(self, batch: list[oms.BytesMessage]) -> None:
        """Send ``batch``. A batch the broker could not take (restarting, failing over: the client already tried
        each broker it knows) is sent again with backoff for ``publish_retry_timeout``, its publishers' window
        still taken, so publishing waits instead of going on while messages it acknowledged are dropped; only
        then, or on a failure that cannot pass (refused input or credentials), is it reported lost (the next
        publish raises)."""
        t = self.transport
        retries = Retries(time.monotonic() + t.options.publish_retry_timeout)
        while True:
            try:
                _, producer, _ = t._clients()
                producer.send_batch(batch)
            except Exception as exc:
                wait = None if isinstance(exc, PERMANENT_SEND_ERRORS) or self._stop_passed() else retries.next_wait()
                if wait is None:
                    t._on_batch_failed(exc, len(batch))
                    return
                if retries.failures == 1:
                    log.warning(
                        "publish of %d message(s) failed (%s); sending it again for up to %.0fs",
                        len(batch),
                        exc,
                        t.options.publish_retry_timeout,
                    )
                self._pause(wait)
                continue
            if retries.failures:
                log.info(
                    "publish of %d message(s) went through after %d failed attempt(s)", len(batch), retries.failures
                )
            return

    def _stop_passed(self) -> bool:
        return self._stop_deadline is not None and time.monotonic() >= self._stop_deadline

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` between attempts; a stop whose deadline passes ends the wait."""
        until = time.monotonic() + seconds
        with self._cond:
            while (left := min(until, self._stop_deadline or math.inf) - time.monotonic()) > 0:
                self._cond.wait(left)


class Keeper:
    """Background upkeep: renew invisibility of held messages, touch queues with x-expires, delete expired ones."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocketmq-keeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10.0)

    def _run(self) -> None:
        t = self.transport
        tick = min(1.0, t._renew_after_s / 2)
        next_expiry = time.monotonic() + t.options.expiry_check_interval
        while not self._stop.wait(tick):
            now = time.monotonic()
            for channel in list(t.channels):
                for held in channel._due_for_renewal(now):
                    held.renew_at = now + t._renew_after_s  # not picked again before the renewal lands
                    t._settler.submit(Settle.RENEW, held)
            try:
                t._touch_consumed_queues()
                if now >= next_expiry:
                    next_expiry = now + t.options.expiry_check_interval
                    t._delete_expired_queues()
            except Exception as exc:  # upkeep tries again next tick
                log.warning("queue upkeep failed: %s", exc)


@dataclass
class _BindingCache:
    by_exchange: dict[str, list[Binding]] = field(default_factory=dict)
    read_at: float = float("-inf")


class Transport(virtual.Transport):
    """``rocketmq://host:port[;host:port]`` (name servers or brokers); see docs/celery.md."""

    Channel = RocketMQChannel
    default_port = DEFAULT_NAMESRV_PORT  # type: ignore[assignment]
    driver_type = "rocketmq"
    driver_name = "orbitmq"
    polling_interval = None  # type: ignore[assignment]  # no client-side sleep: receives long-poll on the broker
    implements = virtual.Transport.implements.extend(
        asynchronous=True,
        exchange_type=frozenset(["direct", "topic", "fanout"]),
        heartbeats=False,
    )
    connection_errors = (  # type: ignore[assignment]
        *virtual.Transport.connection_errors,
        BrokerUnreachable,
        PublishFailed,
        oms.OMSConnectionException,
        oms.OMSTimeOutException,
    )
    channel_errors = (*virtual.Transport.channel_errors, oms.OMSResourceNotExistException)  # type: ignore[assignment]

    def __init__(self, client: Any, **kwargs: Any) -> None:
        super().__init__(client, **kwargs)
        self.options = TransportOptions.parse(client.transport_options or {})
        self._invisible_ms = int(self.options.invisible_time * 1000)
        self._renew_after_s = self.options.invisible_time / 2
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._ap: oms.MessagingAccessPoint | None = None
        self._producer: Producer | None = None
        self._admin: ResourceManager | None = None
        self._consumers: dict[str, PullConsumer] = {}  # topic -> its group's consumer
        self._meta: dict[str, QueueMeta] = {}
        self._bound: dict[str, dict[str, str]] = {}  # queue -> binding attributes this process stored
        self._binding_cache = _BindingCache()
        self._refreshing = threading.Event()  # a background read of the binding table is under way
        self._touched: dict[str, float] = {}  # queue -> monotonic time of the last touch
        self._ready: deque[tuple[RocketMQChannel, str, dict[str, Any]]] = deque()
        self._ready_cond = threading.Condition()
        # a byte in this pipe tells the worker's event loop that messages are ready (implements.asynchronous); one
        # byte until it drains the pipe: a write releases the GIL, and getting it back from the busy worker thread
        # can take a switch interval (5 ms), so the I/O loop writes only when the worker is not already woken
        self._wake_sent = False  # under _ready_cond
        self._wake_r, self._wake_w = os.pipe()
        self._hub: Any = None  # Celery's kombu hub, once register_with_event_loop gave it (see hub.py)
        self._hub_thread = 0
        self._hub_fetchers: set[HubFetcher] = set()  # until closed: shutdown drops their connections
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        # Fetchers (one per consumed queue) and the settler are tasks on the access point's own loop thread, where
        # the oms client runs its calls: they await receives and acks inline, without handing each call to that
        # thread and its answer back (two self-pipe writes and thread wake-ups per call). A fetcher waiting for
        # credit is woken only when enough is free, and acks reach a busy settler without a thread wake-up. Started
        # with the connection; a fetcher still in a long poll at shutdown is cancelled (see docs/celery.md, gaps).
        self._io: LoopThread | None = None
        self._tasks: set[concurrent.futures.Future[Any]] = set()  # fetchers and the settler on that loop
        self._tasks_lock = threading.Lock()  # not self._lock: the settler starts while _connect holds that one
        self._settler = Settler(self)
        self._keeper = Keeper(self)
        self._started = False
        self._sender = Sender(self)
        self._publish_failure: BaseException | None = None

    # -- connection ---------------------------------------------------------------------------------------------

    def _endpoints(self) -> str:
        client = self.client
        assert client is not None
        hosts = []
        for raw in [client.hostname or "127.0.0.1", *(client.alt or [])[1:]]:
            text = re.sub(r"^[a-zA-Z0-9+.-]+://", "", str(raw)).split("/", 1)[0].rsplit("@", 1)[-1]
            if not text:
                continue
            if ":" not in text:
                port = client.port or self.default_port
                text = f"{text}:{port}"
            hosts.append(text)
        return ";".join(dict.fromkeys(hosts))

    def establish_connection(self) -> Any:
        with self._lock:
            if self._ap is None:
                self._connect()
        return super().establish_connection()

    def _connect(self) -> None:
        endpoints = self._endpoints()
        timeout_ms = int(self.options.operation_timeout * 1000)
        client = self.client
        assert client is not None
        key = client.userid or self.options.access_key or None
        secret = client.password or self.options.secret_key or None
        ap = oms.get_messaging_access_point(
            f"oms:rocketmq://{endpoints}/", access_key=key, secret_key=secret, operation_timeout=timeout_ms
        ).startup()
        try:
            admin = ap.resource_manager(operation_timeout=timeout_ms)
            try:
                admin.cluster_list()
            except oms.OMSException as exc:
                raise BrokerUnreachable(f"no OrbitMQ broker or name server answered at {endpoints}: {exc}") from exc
            producer = ap.create_producer(operation_timeout=timeout_ms).startup()
        except BaseException:
            ap.shutdown()
            raise
        self._ap, self._admin, self._producer = ap, admin, producer
        if not self._started:
            self._started = True
            self._io = producer.loop_thread()
            self._settler = Settler(self)
            self._keeper = Keeper(self)
            self._sender = Sender(self)
            self._settler.start(self._io)
            self._keeper.start()
            self._sender.start()
            self._register_exit_flush()

    def close_connection(self, connection: Any) -> None:
        try:
            super().close_connection(connection)
        finally:
            self._shutdown()

    def _register_exit_flush(self) -> None:
        """Queued publishes are sent before the process exits: at interpreter exit, and when a Celery pool child
        ends (billiard runs its own finalizers, then ``os._exit``)."""
        atexit.register(self._flush_at_exit)
        with contextlib.suppress(ImportError):
            from billiard import util as billiard_util

            billiard_util.Finalize(None, _flush_transport, args=(weakref.ref(self),), exitpriority=10)

    def _flush_at_exit(self) -> None:
        if self._started and not self._forked():
            self._sender.flush(self.options.operation_timeout * 2)

    def _forked(self) -> bool:
        """True in a forked child's copy: its threads, clients and held messages belong to the parent."""
        return os.getpid() != self._pid

    def _shutdown(self) -> None:
        if self._forked():
            return
        if self._started:
            self._sender.stop(self.options.operation_timeout * 2)
            atexit.unregister(self._flush_at_exit)
        for fetcher in list(self._hub_fetchers):
            fetcher.close()  # a long poll in flight is given up (as the loop's fetchers are cancelled below)
        if self._started:
            self._keeper.stop()
            self._settler.stop()
            self._cancel_tasks()  # fetchers still in a long poll are cut short (their channels closed already)
            self._started = False
        with self._lock:
            ap, self._ap = self._ap, None
            self._producer = self._admin = None
            self._consumers.clear()
            self._meta.clear()
        if ap is not None:
            ap.shutdown()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)

    def driver_version(self) -> str:
        return oms.CLIENT_VERSION

    def as_uri(self, uri: str, include_password: bool = False, mask: str = "**") -> str:
        return "rocketmq://" + self._endpoints()

    # -- delivering to kombu ------------------------------------------------------------------------------------

    def _ready_for(self, channel: RocketMQChannel, queue: str, payloads: list[dict[str, Any]]) -> None:
        with self._ready_cond:
            self._ready.extend((channel, queue, p) for p in payloads)
            self._ready_cond.notify_all()
            wake, self._wake_sent = not self._wake_sent, True
        if not wake:
            return
        io = self._io
        if io is not None and io.in_loop():
            # The fetcher goes on to send its next receive before the loop idles. Woken now, the worker's thread
            # would wait for the GIL through that work (and lose it again at each of its syscalls); woken at the
            # loop's next turn, it finds the loop thread about to sleep in select (docs/celery.md, latency).
            io.loop.call_soon(self._write_wake)
        else:
            self._write_wake()

    def _write_wake(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def _poke_hub(self) -> None:
        """Make the hub's next socket poll return at once. What Celery does with a task it was handed (its ack, for
        one) it defers with ``hub.call_soon``; made from a ready callback, that runs only after the next poll, which
        waits up to the next timer (a second) when nothing else is readable: a solo worker sat on its first batch's
        acks, its credit used up, for that long."""
        with self._ready_cond:
            wake, self._wake_sent = not self._wake_sent, True
        if wake:
            self._write_wake()

    def _deliver_ready(self) -> int:
        delivered = 0
        while True:
            try:
                channel, queue, payload = self._ready.popleft()
            except IndexError:
                return delivered
            delivered += self._deliver_one(channel, queue, payload)

    def _deliver_one(self, channel: RocketMQChannel, queue: str, payload: dict[str, Any]) -> int:
        """Hand a buffered message to kombu's callback of ``queue`` (on the worker's thread); 1 if it was."""
        channel._handed_over()  # before the callback: kombu's ledger counts it from there
        tag = payload["properties"]["delivery_tag"]
        callback = self._callbacks.get(queue)
        if callback is None or channel.closed:
            channel._settle(tag, Settle.REQUEUE)  # its consumer went away meanwhile
            return 0
        callback(payload)
        if queue in channel._no_ack:
            channel._settle(tag, Settle.ACK)
        return 1

    def drain_events(self, connection: Any, timeout: float | None = None, **kwargs: Any) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready_cond:
            while not self._ready:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError()
                self._ready_cond.wait(left)
        self._drain_pipe()
        self._deliver_ready()

    def _drain_pipe(self) -> None:
        """Before taking what is ready: empty the pipe, then a message readied from here on writes a byte again.

        In this order: a byte written before the flag is cleared stays in the pipe or is read here, and what it
        announced is taken right after; cleared first, a byte read here could leave the flag set with an empty pipe,
        and the next messages would wait without a wake-up."""
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._wake_r, 4096):
                pass
        with self._ready_cond:
            self._wake_sent = False

    def register_with_event_loop(self, connection: Any, loop: Any) -> None:
        """Celery's hub: queues consumed from its thread from now on are read there (``hub.py``); the pipe still
        wakes it for fetchers on the client's loop (consumed before, or from another thread)."""
        loop.add_reader(self._wake_r, self.on_readable, self._wake_r)
        self._hub, self._hub_thread = loop, threading.get_ident()

    def _hub_here(self) -> Any:
        """The hub to read a queue consumed now on, if this thread runs one (else its fetcher uses the client's
        loop, and ``drain_events`` or the pipe takes what it brings)."""
        if self._hub is not None and self._hub_thread == threading.get_ident() and not self._forked():
            return self._hub
        return None

    def on_readable(self, fileno: int) -> None:  # type: ignore[override]  # the hub passes the fd, as for Redis
        self._drain_pipe()
        self._deliver_ready()

    # -- oms plumbing -------------------------------------------------------------------------------------------

    def _clients(self) -> tuple[oms.MessagingAccessPoint, Producer, ResourceManager]:
        if self._ap is None or self._producer is None or self._admin is None:
            with self._lock:
                if self._ap is None:
                    self._connect()
        assert self._ap is not None and self._producer is not None and self._admin is not None
        return self._ap, self._producer, self._admin

    def _io_loop(self) -> LoopThread:
        self._clients()  # connected, so the I/O loop runs
        assert self._io is not None
        return self._io

    def _start_task(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run a fetcher or the settler on the I/O loop; shutdown cancels what is still running."""
        io = self._io
        assert io is not None, "not connected"
        future = io.submit(coro)
        with self._tasks_lock:
            self._tasks.add(future)
        future.add_done_callback(self._task_done)
        return future

    def _task_done(self, future: concurrent.futures.Future[Any]) -> None:
        with self._tasks_lock:
            self._tasks.discard(future)
        if not future.cancelled() and (exc := future.exception()) is not None:
            log.error("an I/O task of the transport ended with %r", exc)

    def _cancel_tasks(self) -> None:
        """Cancel the fetchers and settler still running on the access point's loop (it outlives them by a moment:
        the access point is shut down next, and its loop cancels whatever is still pending when it stops)."""
        with self._tasks_lock:
            tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        self._io = None

    def _consumer(self, topic: str) -> PullConsumer:
        consumer = self._consumers.get(topic)
        if consumer is not None:
            return consumer
        ap, _, _ = self._clients()
        with self._lock:
            consumer = self._consumers.get(topic)
            if consumer is None:
                consumer = ap.create_pull_consumer(
                    {
                        ConsumerKeys.CONSUME_FROM_WHERE: "first",
                        ConsumerKeys.INVISIBLE_TIME: self._invisible_ms,
                        ConsumerKeys.PULL_BATCH_SIZE: 1,  # receive exactly what the channel's prefetch allows
                    },
                    consumer_id=group_for_topic(self.options.group_prefix, topic),
                    operation_timeout=int(self.options.operation_timeout * 1000),
                )
                consumer.attach_queue(topic)
                consumer.startup()
                self._consumers[topic] = consumer
        return consumer

    # -- queues -------------------------------------------------------------------------------------------------

    def _declare(self, queue: str, args: dict[str, Any], auto_delete: bool) -> QueueMeta:
        meta = QueueMeta(
            queue,
            topic_for_queue(queue),
            max_priority=_int_arg(args, "x-max-priority", 0, 255),
            message_ttl_ms=_int_arg(args, "x-message-ttl", 0, 2**31),
            expires_ms=_int_arg(args, "x-expires", 0, 2**31),
        )
        if self._meta.get(queue) == meta and not meta.expires_ms:
            return meta
        # A queue with x-expires may have been deleted by any transport since: declaring it again recreates it with
        # the bindings this process made (kombu does not bind again what it bound once).
        attributes = {
            **self._bound.get(queue, {}),
            ATTR_QUEUE: queue,
            ATTR_MAX_PRIORITY: str(meta.max_priority),
            ATTR_MESSAGE_TTL: str(meta.message_ttl_ms),
            ATTR_EXPIRES: str(meta.expires_ms),
            ATTR_TOUCHED: str(int(time.time() * 1000)),
        }
        _, _, admin = self._clients()
        for topic in meta.topics(self.options.priority_steps):
            admin.update_topic(
                topic,
                read_queue_nums=self.options.queue_nums,
                write_queue_nums=self.options.queue_nums,
                message_type="MIXED",
                attributes=attributes,
                create=True,
            )
        self._meta[queue] = meta
        self._touched[queue] = time.monotonic()
        return meta

    def _queue_meta(self, queue: str, create: bool = True) -> QueueMeta | None:
        meta = self._meta.get(queue)
        if meta is not None:
            return meta
        topic = topic_for_queue(queue)
        _, _, admin = self._clients()
        try:
            rows = admin.topic_configs(topic)
        except oms.OMSResourceNotExistException:
            rows = []
        if not rows:
            return self._declare(queue, {}, False) if create else None
        attrs = rows[0].attributes
        meta = QueueMeta(
            queue,
            topic,
            max_priority=int(attrs.get(ATTR_MAX_PRIORITY, "0") or 0),
            message_ttl_ms=int(attrs.get(ATTR_MESSAGE_TTL, "0") or 0),
            expires_ms=int(attrs.get(ATTR_EXPIRES, "0") or 0),
        )
        self._meta[queue] = meta
        return meta

    def _bucket_groups(self, meta: QueueMeta) -> list[tuple[str, str]]:
        prefix = self.options.group_prefix
        return [(t, group_for_topic(prefix, t)) for t in meta.topics(self.options.priority_steps)]

    def _size(self, queue: str) -> int:
        meta = self._queue_meta(queue, create=False)
        if meta is None:
            return 0
        _, _, admin = self._clients()
        total = 0
        for topic, group in self._bucket_groups(meta):
            progress = admin.consumer_progress(group, topic)
            if progress.queues and all(q.consumer_offset < 0 for q in progress.queues):
                total += admin.topic_status(topic).total_messages  # the group never consumed: all of it is ready
            else:
                total += progress.total_lag
        return total

    def _purge(self, queue: str) -> int:
        meta = self._queue_meta(queue, create=False)
        if meta is None:
            return 0
        count = self._size(queue)
        _, _, admin = self._clients()
        for topic, group in self._bucket_groups(meta):
            admin.reset_offset_by_time(group, topic, FAR_FUTURE_MS)
        return count

    def _delete_queue(self, queue: str) -> None:
        meta = self._queue_meta(queue, create=False)
        self._meta.pop(queue, None)
        self._touched.pop(queue, None)
        if meta is None:
            return
        _, _, admin = self._clients()
        for topic, group in self._bucket_groups(meta):
            with self._lock:
                consumer = self._consumers.pop(topic, None)
            if consumer is not None:
                consumer.shutdown()
            with contextlib.suppress(oms.OMSResourceNotExistException):
                admin.delete_topic(topic)
            with contextlib.suppress(oms.OMSResourceNotExistException):
                admin.delete_group(group)
        self._binding_cache.read_at = float("-inf")

    def _touch_consumed_queues(self) -> None:
        now = time.monotonic()
        consumed = {q for ch in list(self.channels) for q in ch._fetchers}
        for queue in consumed:
            meta = self._meta.get(queue)
            if meta is None or not meta.expires_ms:
                continue
            if now - self._touched.get(queue, 0.0) < meta.expires_ms / 3000:
                continue
            self._touched[queue] = now
            _, _, admin = self._clients()
            admin.update_topic(meta.topic, attributes={ATTR_TOUCHED: str(int(time.time() * 1000))})

    def _delete_expired_queues(self) -> None:
        _, _, admin = self._clients()
        now_ms = int(time.time() * 1000)
        mine = {q for ch in list(self.channels) for q in ch._fetchers}
        for row in admin.topic_configs():
            attrs = row.attributes
            expires = int(attrs.get(ATTR_EXPIRES, "0") or 0)
            queue = attrs.get(ATTR_QUEUE)
            if not expires or queue is None or queue in mine or row.topic != topic_for_queue(queue):
                continue
            if int(attrs.get(ATTR_TOUCHED, "0") or 0) + expires < now_ms:
                log.info("queue %s unused for over %d ms (x-expires): deleting it", queue, expires)
                self._delete_queue(queue)

    # -- bindings -----------------------------------------------------------------------------------------------

    def _bind(self, binding: Binding) -> None:
        meta = self._queue_meta(binding.queue)
        assert meta is not None
        key, value = binding.attribute()
        _, _, admin = self._clients()
        admin.update_topic(meta.topic, attributes={key: value})
        self._bound.setdefault(binding.queue, {})[key] = value
        cache = self._binding_cache.by_exchange.setdefault(binding.exchange, [])
        if binding not in cache:
            cache.append(binding)

    def _bindings(self, exchange: str, fresh: bool = False) -> list[Binding]:
        """The broker's bindings of ``exchange``. ``fresh`` (fanout, nothing matched) reads the table now unless it
        was read in the last 50 ms; otherwise a table older than ``binding_cache`` is read again in the background,
        so a publish never waits for that read once one table is known."""
        cache = self._binding_cache
        age = time.monotonic() - cache.read_at
        if cache.read_at == float("-inf") or (fresh and age > 0.05):
            self._read_bindings_logged()
        elif age > self.options.binding_cache and not self._refreshing.is_set():
            self._refreshing.set()
            threading.Thread(target=self._read_bindings_logged, name="rocketmq-bindings", daemon=True).start()
        return list(self._binding_cache.by_exchange.get(exchange, []))

    def _read_bindings_logged(self) -> None:
        try:
            self._read_bindings()
        except oms.OMSException as exc:  # routing goes on with what is known; the next read tries again
            log.warning("reading the binding table failed: %s", exc)
        finally:
            self._refreshing.clear()

    def _read_bindings(self) -> None:
        _, _, admin = self._clients()
        table: dict[str, list[Binding]] = {}
        seen: set[tuple[str, str]] = set()
        for row in admin.topic_configs():
            queue = row.attributes.get(ATTR_QUEUE)
            if queue is None or (row.topic, queue) in seen:
                continue
            seen.add((row.topic, queue))
            for key, value in row.attributes.items():
                if not key.startswith(ATTR_BIND_PREFIX):
                    continue
                try:
                    raw = json.loads(value)
                    b = Binding(raw["e"], raw.get("t", "direct"), raw["r"], raw.get("p", ""), queue)
                except (ValueError, KeyError, TypeError):
                    log.warning("topic %s has a malformed binding %s=%r", row.topic, key, value)
                    continue
                table.setdefault(b.exchange, []).append(b)
        self._binding_cache = _BindingCache(table, time.monotonic())

    # -- messages -----------------------------------------------------------------------------------------------

    def _publish(self, queue: str, message: dict[str, Any]) -> None:
        meta = self._queue_meta(queue)
        assert meta is not None
        _, producer, _ = self._clients()
        props = message.get("properties") or {}
        step = 0
        if meta.max_priority:
            try:
                priority = min(int(props.get("priority") or 0), meta.max_priority)
            except (TypeError, ValueError):
                priority = 0
            step = bucket_of(priority, self.options.priority_steps)
        body = kombu_dumps(message).encode("utf-8")
        out = oms.BytesMessage(body, bucket_topic(meta.topic, step))
        out.put_user_headers(ORIGIN_QUEUE, queue)
        now_ms = int(time.time() * 1000)
        due = _eta_ms(message.get("headers") or {})
        if due is not None and due - now_ms > TIMER_MIN_AHEAD_MS:
            out.put_user_headers(DUE_MS, due)
            out.put_sys_headers(oms.BuiltinKeys.START_TIME, min(due, now_ms + MAX_TIMER_MS))
        ttl = props.get("expiration")
        if ttl is not None:
            try:
                out.put_user_headers(EXPIRES_MS, now_ms + max(0, int(float(ttl))))
            except (TypeError, ValueError):
                raise ValueError(f"message property expiration={ttl!r} is not a number of milliseconds") from None
        self._send(producer, out)

    def _send(self, producer: Producer, out: oms.BytesMessage) -> None:
        """Validate here (bad input raises at publish), then send: a lone publish on this thread, answered here; in a
        burst, through the sender thread, which sends what queued meanwhile in one batch (publisher confirms,
        asynchronously). A send that fails later is logged and makes the next publish raise, so Celery's retry
        policy sees it. ``publish_window`` 0: wait for each send."""
        failed = self._publish_failure
        if failed is not None:
            self._publish_failure = None
            raise PublishFailed(f"an earlier publish failed on the broker: {failed}") from failed
        try:
            validate_body(out.body)
        except MQError as exc:
            raise from_mq_error(exc) from None
        if not self.options.publish_window:
            producer.send(out)
            return
        self._sender.submit(out)

    def _on_batch_failed(self, error: BaseException, count: int) -> None:
        log.error("publish of %d message(s) failed on the broker (the next publish raises): %s", count, error)
        self._publish_failure = error

    def _receive(
        self, channel: RocketMQChannel, queue: str, n: int, wait_s: float, reserved: int = 0
    ) -> list[dict[str, Any]]:
        """Up to ``n`` payloads of ``queue`` for ``channel``: priority buckets highest first without waiting, then a
        long poll of the lowest. ``reserved`` credits of the channel are given back, the messages counted as held."""
        held: list[Held] = []
        payloads: list[dict[str, Any]] = []
        try:
            meta = self._queue_meta(queue)
            assert meta is not None
            topics = meta.topics(self.options.priority_steps)
            for i, topic in enumerate(topics):
                consumer = self._consumer(topic)
                got = consumer.batch_receive(n, wait_s if i == len(topics) - 1 else 0.0)
                held, payloads, reparks = self._accept(consumer, meta, got)
                for h, copy in reparks:
                    self._repark(h, copy)
                if payloads:
                    break
        finally:
            channel._received(reserved, held, buffered=bool(reserved))
        return payloads

    async def _receive_async(
        self, channel: RocketMQChannel, queue: str, reserved: int, wait_s: float
    ) -> list[dict[str, Any]]:
        """A fetcher's receive, on the I/O loop: as ``_receive``, for the ``reserved`` credits of ``channel``, which
        are given back when the messages are counted as held (buffered until the worker's thread takes them)."""
        held: list[Held] = []
        payloads: list[dict[str, Any]] = []
        try:
            # known since basic_consume; a queue deleted under the fetcher needs admin calls, which block: off the loop
            meta = self._meta.get(queue) or await asyncio.to_thread(self._queue_meta, queue)
            assert meta is not None
            topics = meta.topics(self.options.priority_steps)
            for i, topic in enumerate(topics):
                consumer = self._consumers.get(topic)
                if consumer is None:
                    consumer = await asyncio.to_thread(self._consumer, topic)
                got = await consumer.aio().batch_receive(reserved, wait_s if i == len(topics) - 1 else 0.0)
                held, payloads, reparks = self._accept(consumer, meta, got)
                for h, copy in reparks:
                    await self._repark_async(h, copy)
                if payloads:
                    break
        finally:
            channel._received(reserved, held, buffered=True)
        return payloads

    def _accept(
        self, consumer: PullConsumer, meta: QueueMeta, got: Iterable[oms.BytesMessage]
    ) -> tuple[list[Held], list[dict[str, Any]], list[tuple[Held, oms.BytesMessage]]]:
        """Turn received messages into kombu payloads; drop expired ones. ETAs beyond the timer limit come back as
        ``(held, copy)``: the caller parks the copy for the next hop (a send) and acks the held one."""
        held: list[Held] = []
        payloads: list[dict[str, Any]] = []
        reparks: list[tuple[Held, oms.BytesMessage]] = []
        now_ms = int(time.time() * 1000)
        group = consumer.group
        renew_at = time.monotonic() + self._renew_after_s
        for m in got:
            h = Held(consumer, m, meta.queue, group, renew_at)
            headers = m.user_headers()
            expires = headers.get(EXPIRES_MS)
            stored = m.store_timestamp or now_ms
            if (expires is not None and int(expires) <= now_ms) or (
                meta.message_ttl_ms and stored + meta.message_ttl_ms <= now_ms
            ):
                self._settler.submit(Settle.ACK, h)  # expired (AMQP drops it; no dead-letter exchange here)
                continue
            due = headers.get(DUE_MS)
            if due is not None and int(due) - now_ms > 1000:
                reparks.append((h, self._next_hop(h, int(due))))
                continue
            payload = _envelope(m.get_body(str))
            payload["properties"]["delivery_tag"] = m.receipt_handle
            payload["redelivered"] = m.reconsume_times > 0
            held.append(h)
            payloads.append(payload)
        return held, payloads, reparks

    @staticmethod
    def _next_hop(held: Held, due_ms: int) -> oms.BytesMessage:
        """An ETA further out than one timer allows: the copy parked for the next hop."""
        copy = oms.BytesMessage(held.message.body, held.message.destination)
        for key, value in held.message.user_headers().items():
            copy.put_user_headers(key, value)
        copy.put_sys_headers(oms.BuiltinKeys.START_TIME, min(due_ms, int(time.time() * 1000) + MAX_TIMER_MS))
        return copy

    def _repark(self, held: Held, copy: oms.BytesMessage) -> None:
        """Park the next hop's copy, then ack the surfaced one (a ``basic_get`` on the worker's thread)."""
        _, producer, _ = self._clients()
        producer.send(copy)
        self._settler.submit(Settle.ACK, held)

    async def _repark_async(self, held: Held, copy: oms.BytesMessage) -> None:
        """As ``_repark``, for a fetcher on the I/O loop (a blocking send there would raise)."""
        _, producer, _ = self._clients()
        await producer.aio().send(copy)
        self._settler.submit(Settle.ACK, held)

    async def _dead_letter(self, held: Held) -> None:
        """reject(requeue=False): a copy goes to the group's %DLQ% topic (RocketMQ's place for it), then the ack."""
        _, producer, _ = self._clients()
        copy = oms.BytesMessage(held.message.body, dlq_topic(held.group))
        for key, value in held.message.user_headers().items():
            if key not in (DUE_MS,):
                copy.put_user_headers(key, value)
        await producer.aio().send(copy)


def _flush_transport(ref: weakref.ref[Transport]) -> None:
    transport = ref()
    if transport is not None:
        transport._flush_at_exit()


def _int_arg(args: dict[str, Any], name: str, low: int, high: int) -> int:
    raw = args.get(name)
    if raw is None:
        return 0
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ValueError(f"queue argument {name}={raw!r} is not an integer") from None
    if not low <= value <= high:
        raise ValueError(f"queue argument {name}={value} is outside [{low}, {high}]")
    return value


Channel = RocketMQChannel

__all__ = ["BrokerUnreachable", "Channel", "PublishFailed", "QoS", "RocketMQChannel", "Transport", "TransportOptions"]
