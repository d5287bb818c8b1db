"""The send path on the loop: choose a queue, send, retry on another broker within the deadline, read the answer.

RocketMQ's ``sendDefaultImpl`` with ``MQFaultStrategy``: round robin per topic, the broker that just failed avoided,
slow brokers isolated for a while when ``send_latency_fault_enable`` is on; ordered sends are pinned to one queue.
Plain messages go as one ``Produce/SendBatch`` (MessageBatch payload, no protobuf per message) where the broker
serves it, else as v2 SendMessage.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.batch_wire import SendBatchWire
from oms.client.core import ClientCore
from oms.client.routes import RouteQueue, TopicRoute
from oms.client.rpc import SUCCESS_CODES
from oms.convert import WireMessage
from oms.errors import (
    OMSConnectionException,
    OMSException,
    OMSMessageFormatException,
    OMSNotSupportedException,
    OMSRuntimeException,
    OMSTimeOutException,
    exception_for,
)
from oms.producer.fault import LatencyFaultTolerance
from oms.producer.plain_run import PlainRun
from oms.producer.result import STATUS_OF_CODE, SendResult
from oms.producer.selector import QueueSelector, group_for_queue
from oms.queue import ANY_QUEUE, MessageQueue
from orbitmq.errors import Code
from orbitmq.message_batch import BatchEntry, encode_message_batch
from orbitmq.proto import produce_pb2

log = logging.getLogger("oms.producer")

# Failures where another broker (or a second try) may succeed; everything else is the caller's to fix.
RETRY_CODES = frozenset(
    {
        Code.INTERNAL_ERROR,
        Code.INTERNAL_SERVER_ERROR,
        Code.FORBIDDEN,  # no writable queue on that broker (RocketMQ retries NO_PERMISSION)
        Code.TOPIC_NOT_FOUND,  # the topic is not (yet) on that broker
        Code.PROXY_TIMEOUT,
        Code.REQUEST_TIMEOUT,
    }
)


def retryable(error: OMSException) -> bool:
    return isinstance(error, OMSConnectionException) or error.code in RETRY_CODES


def split_batches(wires: Sequence[WireMessage], max_bytes: int, max_count: int) -> list[list[int]]:
    """Indexes of ``wires`` grouped per topic (first-seen order) into requests of at most ``max_bytes`` of bodies
    and ``max_count`` messages; a single larger message gets a request of its own."""
    by_topic: dict[str, list[int]] = {}
    for i, wire in enumerate(wires):
        by_topic.setdefault(wire.topic, []).append(i)
    chunks: list[list[int]] = []
    for indexes in by_topic.values():
        current: list[int] = []
        size = 0
        for i in indexes:
            body = wires[i].body_size
            if current and (size + body > max_bytes or len(current) >= max_count):
                chunks.append(current)
                current, size = [], 0
            current.append(i)
            size += body
        if current:
            chunks.append(current)
    return chunks


def check_pinnable(wire: WireMessage) -> None:
    if wire.message_type not in (definition_pb2.NORMAL, definition_pb2.FIFO):
        raise OMSMessageFormatException(Code.BAD_REQUEST, "a selector cannot be combined with a delay or a transaction")


def pin(wire: WireMessage, selector: QueueSelector, arg: Any, route: TopicRoute) -> RouteQueue:
    """Let ``selector`` choose among the writable queues, and make the broker store the message there."""
    writable = route.writable()
    if not writable:
        raise OMSRuntimeException(Code.FORBIDDEN, f"topic {wire.topic!r} has no writable queue")
    assert wire.source is not None, "selector sends start from a message"
    chosen = selector([q.queue for q in writable], wire.source, arg)
    by_queue = {q.queue: q for q in writable}
    target = by_queue.get(chosen) if isinstance(chosen, MessageQueue) else None
    if target is None:
        raise OMSRuntimeException(Code.BAD_REQUEST, f"the selector returned {chosen!r}, not one of the queues")
    if not target.accepts(definition_pb2.FIFO):
        # RocketMQ 4 partition order on a NORMAL topic: the message is stored, plain, in the chosen queue
        # (Produce/SendBatch carries a queue id where v2 SendMessage places by message group).
        if wire.message_type != definition_pb2.NORMAL or not target.accepts(definition_pb2.NORMAL):
            raise OMSMessageFormatException(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"topic {wire.topic!r} accepts neither FIFO messages nor a plain message in a chosen queue",
            )
        if wire.batch_properties is None:
            raise OMSNotSupportedException(
                Code.NOT_IMPLEMENTED,
                f"a selector send to NORMAL topic {wire.topic!r} stores a plain message in the chosen queue: a body "
                "compressed on the way (over compress_msg_body_over_howmuch) or a namespace cannot be; send it "
                "uncompressed, or use a FIFO topic",
            )
        return target
    sp = wire.pb.system_properties
    sp.queue_id = target.queue.queue_id
    # a message group the broker hashes onto exactly this queue; the message's own sharding key gives way
    sp.message_group = group_for_queue(target.queue.queue_id, len(route.writable_on(target.broker_name)))
    sp.message_type = definition_pb2.FIFO
    wire.message_type = definition_pb2.FIFO
    return target


def topic_of(wires: Sequence[WireMessage]) -> str:
    """The topic of a request's messages (a request has one); a ``PlainRun`` knows it without making a row's
    ``WireMessage`` (decoded properties and all), which ``wires[0]`` would, several times per call."""
    return wires.topic if isinstance(wires, PlainRun) else wires[0].topic


def candidates(route: TopicRoute, wires: Sequence[WireMessage]) -> tuple[RouteQueue, ...]:
    """The writable queues of the topic that accept every message type in ``wires``."""
    topic = topic_of(wires)
    writable = route.writable()
    if not writable:
        raise OMSRuntimeException(Code.FORBIDDEN, f"topic {topic!r} has no writable queue")
    types = wires.message_types if isinstance(wires, PlainRun) else {w.message_type for w in wires}
    found = tuple(q for q in writable if all(q.accepts(t) for t in types))
    if not found:
        names = ", ".join(sorted(definition_pb2.MessageType.Name(t) for t in types))
        accepted = ", ".join(sorted({definition_pb2.MessageType.Name(t) for q in writable for t in q.accept_types}))
        raise OMSMessageFormatException(
            Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"topic {topic!r} accepts {accepted} messages, not {names}"
        )
    return found


def send_results(
    response: service_pb2.SendMessageResponse, wires: Sequence[WireMessage], queue: RouteQueue, pinned: bool
) -> list[SendResult]:
    """One ``SendResult`` per message, or the exception of the first status that is not a success."""
    where = f"SendMessage to {queue.broker_name}"
    top = int(response.status.code)
    if top == 0:
        raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{where}: the response carries no status")
    if top not in SUCCESS_CODES and top not in STATUS_OF_CODE:
        raise exception_for(top, f"{where}: {response.status.message}")
    if len(response.entries) != len(wires):
        raise OMSRuntimeException(
            Code.INTERNAL_ERROR, f"{where}: {len(response.entries)} results for {len(wires)} messages"
        )
    results = []
    for entry, wire in zip(response.entries, wires, strict=True):
        code = int(entry.status.code) if entry.HasField("status") else top
        status = STATUS_OF_CODE.get(code)
        if status is None:
            raise exception_for(code, f"{where}: message {wire.message_id}: {entry.status.message}")
        queue_id = int(wire.pb.system_properties.queue_id) if pinned else ANY_QUEUE
        results.append(
            SendResult(
                message_id=entry.message_id or wire.message_id,
                topic=wire.topic,
                queue=MessageQueue(wire.topic, queue.broker_name, queue_id),
                queue_offset=int(entry.offset),
                status=status,
                transaction_id=entry.transaction_id or None,
                recall_handle=entry.recall_handle or None,
            )
        )
    return results


def partition_pinned(pinned: RouteQueue | None) -> bool:
    """Whether a selector send goes to a queue of a topic without FIFO messages (RocketMQ 4 partition order)."""
    return pinned is not None and not pinned.accepts(definition_pb2.FIFO)


def send_batch_request(wires: Sequence[WireMessage], queue_id: int = ANY_QUEUE) -> produce_pb2.SendBatchRequest | None:
    """``wires`` (one topic) as a ``Produce/SendBatch`` request to ``queue_id`` (the broker picks one by default),
    or None when one of them needs v2 SendMessage (delay, transaction, message group, compressed body, namespace)."""
    wire = send_batch_wire(wires, queue_id)
    return None if wire is None else wire.to_pb()


def send_batch_wire(wires: Sequence[WireMessage], queue_id: int = ANY_QUEUE) -> SendBatchWire | None:
    """``send_batch_request`` serialized by hand, for the direct path: its payload is never copied (batch_wire)."""
    if isinstance(wires, PlainRun):
        return wires.wire(queue_id)
    entries = []
    for w in wires:
        props = w.batch_properties
        if props is None or w.message_type != definition_pb2.NORMAL:
            return None
        entries.append(BatchEntry(0, w.body, props))
    return SendBatchWire(
        topic=wires[0].topic,
        queue_id=queue_id,
        messages=encode_message_batch(entries),
        count=len(entries),
        born_timestamp_ms=int(time.time() * 1000),
    )


def send_batch_results(
    response: produce_pb2.SendBatchResponse, wires: Sequence[WireMessage], queue: RouteQueue, pinned: bool = False
) -> list[SendResult]:
    """The results ``send_results`` would give for the same messages: the batch sits contiguously in one queue
    (named when a selector chose it, else ``ANY_QUEUE`` as v2 results say)."""
    where = f"SendBatch to {queue.broker_name}"
    code = int(response.status.code)
    if code == 0:
        raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{where}: the response carries no status")
    status = STATUS_OF_CODE.get(code)
    if status is None:
        raise exception_for(code, f"{where}: {response.status.message}")
    if len(response.commitlog_offsets) != len(wires):
        raise OMSRuntimeException(
            Code.INTERNAL_ERROR, f"{where}: {len(response.commitlog_offsets)} results for {len(wires)} messages"
        )
    first = int(response.first_queue_offset)
    # the queue a selector chose; else ANY_QUEUE, as v2 SendMessage's results say (one topic: one queue object)
    where_stored = MessageQueue(topic_of(wires), queue.broker_name, queue.queue.queue_id if pinned else ANY_QUEUE)
    if isinstance(wires, PlainRun):
        return wires.results(where_stored, first, status)
    return [SendResult(wire.message_id, wire.topic, where_stored, first + i, status) for i, wire in enumerate(wires)]


class DirectAttemptFailed(Exception):
    """A direct attempt (``Sender.send_direct``) failed the way ``send`` retries: what failed, and where."""

    def __init__(self, error: OMSException, broker: str) -> None:
        super().__init__(error)
        self.error = error
        self.broker = broker


class Sender:
    """Queue choice and retries for one producer. ``send`` runs on the loop; ``send_direct`` on callers' threads
    (the round-robin counters are C-level ``itertools.count``s, the fault table locks itself)."""

    def __init__(self, retry_times_when_send_failed: int, send_latency_fault_enable: bool) -> None:
        self.attempts = 1 + retry_times_when_send_failed
        self.fault = LatencyFaultTolerance(send_latency_fault_enable)
        self._counters: dict[str, Iterator[int]] = {}  # round-robin position per topic

    def select(self, topic: str, queues: Sequence[RouteQueue], last_broker: str | None) -> RouteQueue:
        """Round robin over ``queues``, avoiding the broker that just failed and (if enabled) slow ones."""
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters[topic] = itertools.count(random.randrange(1 << 16))
        start = next(counter)
        n = len(queues)
        brokers = {q.broker_name for q in queues}
        avoid = last_broker if len(brokers) > 1 else None
        ordered = [queues[(start + i) % n] for i in range(n)]
        if self.fault.enabled:
            for q in ordered:
                if q.broker_name != avoid and self.fault.is_available(q.broker_name):
                    return q
            best = self.fault.least_bad(sorted(brokers - {avoid} if avoid else brokers))
            for q in ordered:
                if q.broker_name == best:
                    return q
        for q in ordered:
            if q.broker_name != avoid:
                return q
        return ordered[0]

    async def send(
        self,
        core: ClientCore,
        wires: Sequence[WireMessage],
        deadline: float,
        pinned: RouteQueue | None = None,
        attempts: int | None = None,
        fast_batch: bool = False,
        *,
        last_broker: str | None = None,
        started: float | None = None,
    ) -> tuple[list[SendResult], RouteQueue]:
        """Send ``wires`` (one topic) as one request; up to ``attempts`` tries (default: the producer's) while
        the deadline (``time.monotonic()``) allows. Returns the results and the queue that took them.
        ``fast_batch``: send plain messages with ``Produce/SendBatch`` where the broker serves it (``send_batch``).
        ``last_broker``/``started``: a direct attempt failed on that broker, the call began then (metrics).

        The caller checked that the producer runs and passes its core: shutdown waits for sends already submitted
        (one-way ones included), so a send that starts after shutdown began still goes out rather than fails.
        """
        started = time.monotonic() if started is None else started
        ok = False
        try:
            sent = await self._send(core, wires, deadline, pinned, attempts, fast_batch, last_broker)
            ok = True
            return sent
        finally:  # rocketmq_send_cost_time: one update for the call, whatever its size (each message costs the call)
            core.metrics.on_send(topic_of(wires), len(wires), time.monotonic() - started, ok)

    async def _send(
        self,
        core: ClientCore,
        wires: Sequence[WireMessage],
        deadline: float,
        pinned: RouteQueue | None,
        attempts: int | None,
        fast_batch: bool,
        last_broker: str | None,
    ) -> tuple[list[SendResult], RouteQueue]:
        attempts = self.attempts if attempts is None else attempts
        topic = topic_of(wires)
        if last_broker is not None:  # a direct attempt failed: the route may have changed
            core.refresh_route_soon(topic)
        route = await core.routes.get(topic)
        queues = (pinned,) if pinned is not None else candidates(route, wires)
        request: service_pb2.SendMessageRequest | None = None  # built on first use: copying the messages costs
        partition = partition_pinned(pinned)
        batch_request = _batch_request(wires, pinned, partition, fast_batch)
        last_error: OMSException | None = None
        for attempt in range(1, attempts + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            queue = pinned or self.select(topic, queues, last_broker)
            started = time.monotonic()
            try:
                batched = None
                if batch_request is not None and core.rpc.serves_send_batch(queue.endpoint):
                    batched = await core.rpc.send_batch(queue.endpoint, batch_request, remaining)
                results = _batch_results(batched, wires, queue, partition)
                if results is None:
                    if request is None:
                        request = service_pb2.SendMessageRequest(messages=[w.pb for w in wires])
                    remaining = deadline - time.monotonic()
                    response = await core.rpc.call(queue.endpoint, "SendMessage", request, remaining, check=False)
                    results = send_results(response, wires, queue, pinned is not None)
            except OMSException as exc:
                can_retry = retryable(exc)
                self.fault.update(queue.broker_name, (time.monotonic() - started) * 1000, isolation=can_retry)
                last_error, last_broker = exc, queue.broker_name
                if not can_retry:
                    raise
                core.refresh_route_soon(topic)
                log.info(
                    "send to %s on %s failed (attempt %d/%d): %s", topic, queue.broker_name, attempt, attempts, exc
                )
                continue
            self.fault.update(queue.broker_name, (time.monotonic() - started) * 1000, isolation=False)
            return results, queue
        if last_error is not None:
            raise last_error
        raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"send to topic {topic!r}: the deadline passed before sending")

    def send_direct(
        self,
        core: ClientCore,
        wires: Sequence[WireMessage],
        deadline: float,
        pinned: RouteQueue | None = None,
        fast_batch: bool = False,
    ) -> tuple[Sequence[SendResult], RouteQueue] | None:
        """``send``'s first attempt made on the calling thread over the broker's frame listener
        (``Rpc.call_direct``): for a thread that would block on the loop's answer anyway. None when it cannot be
        made there (the topic's route or the broker's frame listener not known yet, a broker that does not serve
        SendBatch): ``send`` on the loop. A failure ``send`` would retry raises ``DirectAttemptFailed`` (retry with
        ``send``, one attempt fewer, ``last_broker`` its broker); any other is raised as it is."""
        topic = topic_of(wires)
        route = core.routes.cached(topic)
        if route is None:
            return None
        queues = (pinned,) if pinned is not None else candidates(route, wires)
        queue = pinned or self.select(topic, queues, None)
        if core.rpc.pool.frame_address(queue.endpoint) is None:  # before any request is built: the loop builds it
            return None
        partition = partition_pinned(pinned)
        batch_request = _batch_wire(wires, pinned, partition, fast_batch)
        started = time.monotonic()
        try:
            batched = None
            if batch_request is not None:
                batched = core.rpc.send_batch_direct(queue.endpoint, batch_request, deadline - started)
                if batched is None:  # not served there: the loop's path learns it and sends v2
                    return None
            results = _batch_results(batched, wires, queue, partition)
            if results is None:
                request = service_pb2.SendMessageRequest(messages=[w.pb for w in wires])
                response = core.rpc.call_direct(
                    queue.endpoint, "SendMessage", request, service_pb2.SendMessageResponse, deadline - started
                )
                if response is None:
                    return None
                results = send_results(response, wires, queue, pinned is not None)
        except OMSException as exc:
            can_retry = retryable(exc)
            self.fault.update(queue.broker_name, (time.monotonic() - started) * 1000, isolation=can_retry)
            if can_retry:
                raise DirectAttemptFailed(exc, queue.broker_name) from None
            core.metrics.on_send(topic, len(wires), time.monotonic() - started, False)
            raise
        self.fault.update(queue.broker_name, (time.monotonic() - started) * 1000, isolation=False)
        core.metrics.on_send(topic, len(wires), time.monotonic() - started, True)
        return results, queue


def _batch_request(
    wires: Sequence[WireMessage], pinned: RouteQueue | None, partition: bool, fast_batch: bool
) -> produce_pb2.SendBatchRequest | None:
    """The SendBatch request an attempt tries first: always for a partition-ordered send (it names the chosen
    queue, v2 SendMessage cannot), for ``fast_batch`` sends without a chosen queue; None: v2 SendMessage."""
    wire = _batch_wire(wires, pinned, partition, fast_batch)
    return None if wire is None else wire.to_pb()


def _batch_wire(
    wires: Sequence[WireMessage], pinned: RouteQueue | None, partition: bool, fast_batch: bool
) -> SendBatchWire | None:
    """``_batch_request`` serialized by hand, for a direct attempt (its frame carries the payload uncopied)."""
    if partition:
        assert pinned is not None
        return send_batch_wire(wires, pinned.queue.queue_id)
    return send_batch_wire(wires) if fast_batch and pinned is None else None


def _batch_results(
    batched: produce_pb2.SendBatchResponse | None, wires: Sequence[WireMessage], queue: RouteQueue, partition: bool
) -> list[SendResult] | None:
    """The results of a SendBatch answer; None when v2 SendMessage is to be sent instead (no SendBatch was sent, or
    it was too large as one record: a BatchCQ topic stores a batch as one record within the broker's maxMessageSize,
    where v2 stores a record per message, so v2's answer is the one to give)."""
    if batched is not None and batched.status.code != Code.MESSAGE_BODY_TOO_LARGE:
        return send_batch_results(batched, wires, queue, partition)
    if partition:  # v2 would place the message in a queue of its own choosing
        raise _partition_not_served(queue, topic_of(wires))
    return None


def _partition_not_served(queue: RouteQueue, topic: str) -> OMSNotSupportedException:
    return OMSNotSupportedException(
        Code.NOT_IMPLEMENTED,
        f"{queue.broker_name} does not serve Produce/SendBatch: a selector send to NORMAL topic "
        f"{topic!r} cannot be stored in the chosen queue (use a FIFO topic)",
    )
