"""Receives read on the worker's own event loop (Celery's kombu hub), as py-amqp and Redis read theirs.

A ``HubFetcher`` long-polls one queue over a non-blocking frame connection of its own (``HubConnection``) registered
on the hub: the hub's readable callback decodes the answer and hands the messages to kombu's callbacks in the same
call. No receive runs on the oms client's loop thread, and nothing crosses threads on the way to the task: the
loop-thread fetcher cost the worker's main process a thread hand-off per receive (pipe, GIL) and that thread's
asyncio work (docs/celery.md, "Fourth pass"). Acks, requeues and renewals stay with the settler on the client's loop.

A second receive may start while one is in flight once half the prefetch is free again: where Celery acks as it
hands a task over (the solo and thread pools, acks early), the worker would otherwise wait a round trip per batch.

A receive the client must make itself goes through that loop (``Transport._receive_async``) and comes back with
``hub.call_soon``: the first one (the topic's route, the broker's frame listener), one after a failure (the broker
may have moved: the client asks again), and every one for a broker without frames.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from google.protobuf.message import DecodeError

from oms.client.frame_codec import FrameRpcError, answer_body
from oms.consumer import PullConsumer
from oms.consumer.config import MAX_RECEIVE_BATCH
from oms.consumer.framed import FramedReceive
from oms.errors import OMSException
from orbitmq.remoting.codec import RemotingCommand
from transports.celery.hub_connection import HubConnection
from transports.celery.timing import HAND_OVER_S, RECEIVE_LINGER_S, backoff_s

if TYPE_CHECKING:
    from transports.celery.transport import QueueMeta, RocketMQChannel

log = logging.getLogger("transports.celery")

DEADLINE_GRACE_S = 1.0  # beyond the call's own timeout (which the broker honours) before the connection is dropped
DEADLINE_CHECK_S = 1.0  # one repeating timer per fetcher checks it (a timer per receive would pile up in the hub's
# heap: kombu keeps a cancelled timer there until it is due)


@dataclass
class _Round:
    """One receive for the channel's ``reserved`` credits: the queue's topics highest priority first, until one
    brings messages (the lowest, last, long-polls). Keyed in its fetcher by the opaque of its call in flight."""

    meta: QueueMeta
    reserved: int
    topics: list[str]
    index: int = 0
    call: FramedReceive | None = None
    consumer: PullConsumer | None = None
    opaque: int = 0
    deadline: float = 0.0  # time.monotonic() past which the answer is given up (checked every DEADLINE_CHECK_S)


class HubWaiter:
    """The credit waiter of a hub fetcher: woken from any thread (an ack, a prefetch change), it polls on the hub.

    On the hub's own thread it polls at once: kombu's hub runs a ``call_soon`` made there only after its next poll
    of the sockets, which waits for the next timer or socket event (up to 10 s on an otherwise idle worker)."""

    def __init__(self, fetcher: HubFetcher) -> None:
        self.need = 1
        self._fetcher = fetcher

    def wake(self) -> None:
        fetcher = self._fetcher
        if threading.get_ident() == fetcher.transport._hub_thread:
            fetcher.poll()
        else:
            fetcher.hub.call_soon(fetcher.poll)


class HubFetcher:
    """Long-polls one queue for its channel while the channel has credit, on the worker's hub (its MainThread)."""

    def __init__(self, channel: RocketMQChannel, queue: str, hub: Any) -> None:
        self.channel = channel
        self.transport = channel.connection
        self.queue = queue
        self.hub = hub
        self._waiter = HubWaiter(self)
        self._conn: HubConnection | None = None
        self._rounds: dict[int, _Round] = {}  # by the opaque of the call in flight on _conn
        self._backlog = False  # the last answer brought all it could: another receive in flight pays off
        self._loop_receive: concurrent.futures.Future[tuple[list[dict[str, Any]], Exception | None]] | None = None
        self._through_loop = True  # the first receive goes through the client: it learns the route and frames
        self._linger_until: float | None = None
        self._timer: Any = None  # a linger or a backoff: poll() when it fires
        self._failures = 0
        self._stopping = False
        self._checker: Any = None  # the repeating timer of _check_deadline

    def start(self) -> None:
        transport = self.transport
        transport._hub_fetchers.add(self)
        self._checker = self.hub.call_repeatedly(DEADLINE_CHECK_S, self._check_deadline)
        meta = transport._queue_meta(self.queue)
        assert meta is not None
        for topic in meta.topics(transport.options.priority_steps):
            transport._consumer(topic)
        self.poll()

    def stop(self) -> None:
        """Ends after the receives in flight, if any (what they bring becomes visible again at once)."""
        self._stopping = True
        self._cancel_timer()
        if not self._rounds and self._loop_receive is None:
            self.close()

    def close(self) -> None:
        """Drop the connection now (transport shutdown): a long poll in flight is given up."""
        self._stopping = True
        self.transport._hub_fetchers.discard(self)
        self._cancel_timer()
        self._drop_connection()
        checker, self._checker = self._checker, None
        if checker is not None:
            checker.cancel()

    def _drop_connection(self) -> None:
        """Close the connection, cancelling its calls in flight (the broker ends their long polls); their credit
        goes back to the channel."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.cancel(list(self._rounds))
        rounds = list(self._rounds.values())
        self._rounds.clear()
        for r in rounds:
            self.channel._received(r.reserved, [], buffered=True)

    def _close_if_idle(self) -> None:
        """A stopping fetcher ends once no receive is in flight (what the others bring is given back on arrival)."""
        if not self._rounds:
            self.close()

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    # -- credit -------------------------------------------------------------------------------------------------

    def poll(self) -> None:
        """Start a receive if the channel has the credit (see ``_take_credits``). With one in flight, only while the
        queue has a backlog (the last answer was full) and for half the prefetch or more: the answer on its way
        brings tasks anyway, so no linger for a smaller one; at an idle queue the broker would park both receives
        and wake both for every message."""
        if self._stopping or self._loop_receive is not None or self.channel.closed:
            return
        busy = bool(self._rounds)
        if busy and (self._through_loop or not self._backlog):
            return  # (through the loop: a failure sent the next receive there, after these answers)
        now = time.monotonic()
        over = not busy and self._linger_until is not None and now >= self._linger_until
        n = self.channel._take_credits(self._receive_size(), over, self._waiter)
        if n:
            self._linger_until = None
            self._cancel_timer()
            self._start(n)
            if self._backlog:
                self.poll()  # the other half of the prefetch, if free: two receives share it
            return
        if self._waiter.need > 1 and self._linger_until is None and not busy:
            self._linger_until = now + RECEIVE_LINGER_S  # some credit is free: wait a little for more
            self._cancel_timer()
            self._timer = self.hub.call_later(RECEIVE_LINGER_S, self._fire)

    def _receive_size(self) -> int:
        """The most one receive takes: while the queue has a backlog, half the prefetch, so that two receives share
        it and one is on its way while the other's tasks are handed over (one receive of all the credit, answered
        with all of it, would leave nothing for a second: the overlap would not come back); else all that is free."""
        prefetch = self.channel.qos.prefetch_count
        if self._backlog and prefetch >= 2:
            return min(MAX_RECEIVE_BATCH, prefetch // 2)
        return MAX_RECEIVE_BATCH

    def _fire(self) -> None:
        self._timer = None
        self.poll()

    # -- receiving ----------------------------------------------------------------------------------------------

    def _start(self, reserved: int) -> None:
        transport = self.transport
        meta = transport._meta.get(self.queue) or transport._queue_meta(self.queue)  # deleted meanwhile: blocks
        assert meta is not None
        if self._through_loop:
            self._receive_through_loop(reserved)
            return
        self._send_next(_Round(meta, reserved, meta.topics(transport.options.priority_steps)))

    def _send_next(self, r: _Round) -> None:
        transport = self.transport
        last = r.index == len(r.topics) - 1
        topic = r.topics[r.index]
        consumer = transport._consumers.get(topic) or transport._consumer(topic)
        wait_s = transport.options.polling_timeout if last else 0.0
        try:
            call = consumer.framed_receive(topic, r.reserved, wait_s)
        except OMSException as exc:  # the consumer was shut down under us (queue deleted): through the loop it is
            log.debug("framed receive of %s not possible: %r", topic, exc)
            call = None
        if call is None:  # the client does not know where (yet): this receive goes through it
            self._receive_through_loop(r.reserved)
            return
        conn = self._conn
        if conn is None or conn.closed or conn.address != (call.host, call.port):
            if conn is not None:
                self._drop_connection()  # the broker moved: what is in flight on the old connection is given up
            try:
                conn = self._conn = HubConnection(
                    self.hub,
                    (call.host, call.port),
                    self._answered,
                    self._failed,
                    transport.options.operation_timeout,
                )
            except OSError as exc:
                self._conn = None
                self._fail_rounds(f"cannot connect to {call.host}:{call.port}: {exc!r}", r)
                return
        r.call, r.consumer = call, consumer
        r.opaque, frame = conn.codec.request(call.method, call.body, call.metadata, call.timeout_s)
        r.deadline = time.monotonic() + call.timeout_s + DEADLINE_GRACE_S
        self._rounds[r.opaque] = r
        conn.send(frame)  # a lost connection fails every round, this one too

    def _answered(self, conn: HubConnection, answer: RemotingCommand) -> None:
        if conn is not self._conn:
            return
        r = self._rounds.pop(answer.opaque, None)
        if r is None:
            return  # the answer to a call given up (a cancel crossed it)
        assert r.call is not None and r.consumer is not None
        try:
            messages = r.consumer.framed_answer(r.call, answer_body(answer, r.call.method))
        except (FrameRpcError, OMSException, DecodeError) as exc:
            # refused: retried with backoff, as the loop's fetcher does
            self._fail_rounds(f"{r.call.what}: {exc}", r)
            return
        transport = self.transport
        held, payloads, reparks = transport._accept(r.consumer, r.meta, messages)
        for h, copy in reparks:
            transport._start_task(transport._repark_async(h, copy))
        if not payloads and r.index < len(r.topics) - 1:
            r.index += 1  # a higher bucket was empty: the next one, for the same credit
            self._send_next(r)
            return
        self._failures = 0
        self._backlog = len(messages) >= r.reserved
        self.channel._received(r.reserved, held, buffered=True)
        self._deliver(payloads)

    def _deliver(self, payloads: list[dict[str, Any]]) -> None:
        """Hand what a receive brought to kombu's callbacks, then receive again (or end, once stopped)."""
        channel = self.channel
        if self._stopping:  # received while the consumer was cancelled: visible again at once
            channel._give_back(payloads)
            self._close_if_idle()
            return
        # With a backlog, look for credit before the hand-over: the broker takes the next receive while Celery works
        # on these, and a consumer acking in its callback starts the one after once half the prefetch is free again.
        # At an idle queue the next receive waits for the hand-over (_await_hand_over).
        if self._backlog:
            self.poll()
        done = 0
        try:
            for payload in payloads:
                self.transport._deliver_one(channel, self.queue, payload)
                done += 1
        finally:
            if done < len(payloads):  # a callback raised (into the hub): the rest must not hold credit forever
                channel._give_back(payloads[done + 1 :])
        if self._stopping:  # a callback cancelled the consumer
            self._close_if_idle()
        elif self._backlog or not payloads:
            self.poll()
        else:
            self._await_hand_over()

    def _await_hand_over(self) -> None:
        """At an idle queue the next receive waits until Celery has handed what came over (an ack: a pool child
        accepted a task, or the solo pool ran it) or HAND_OVER_S passed (``acks_late``). Sent at once, it wakes
        the broker while the task starts: on two cores the worker, the broker and the pool child then want a core
        each, and the task waits (the latency tail). Nothing is waiting anyway: the last answer was not full."""
        self._cancel_timer()
        self._timer = self.hub.call_later(HAND_OVER_S, self._fire)
        self.channel._await_settle(self._waiter)

    def _check_deadline(self) -> None:
        now = time.monotonic()
        late = [r for r in self._rounds.values() if now >= r.deadline]
        if not late:
            return
        r = late[0]
        what = r.call.what if r.call is not None else self.queue
        self._drop_connection()  # the connection goes: what else is in flight on it too
        self._fail_rounds(f"{what}: no answer in time")

    def _failed(self, conn: HubConnection, reason: str) -> None:
        if conn is self._conn:
            self._conn = None
            if self._rounds:  # with none in flight the next receive connects again (or fails then)
                self._fail_rounds(reason)

    def _fail_rounds(self, reason: str, failed: _Round | None = None) -> None:
        """A receive failed (the broker may be restarting): the credit of ``failed`` (given) and of every receive
        still in flight on a connection that is gone back, a retry with backoff, through the client's loop (which
        learns the broker's address again). Receives on a live connection go on."""
        if self._conn is None:
            self._drop_connection()  # nothing left to cancel: their credit back
        if failed is not None:
            self.channel._received(failed.reserved, [], buffered=True)
        if self._stopping:
            self._close_if_idle()
            return
        delay = backoff_s(self._failures)
        self._failures += 1
        self._through_loop = True
        log.warning("receive from %s failed (%s); retrying in %.2fs", self.queue, reason, delay)
        self._cancel_timer()
        self._timer = self.hub.call_later(delay, self._fire)

    # -- a receive through the client's loop --------------------------------------------------------------------

    def _receive_through_loop(self, reserved: int) -> None:
        transport = self.transport
        future = transport._start_task(self._loop_receive_outcome(reserved))
        self._loop_receive = future
        future.add_done_callback(lambda f: self.hub.call_soon(self._loop_received, f))

    async def _loop_receive_outcome(self, reserved: int) -> tuple[list[dict[str, Any]], Exception | None]:
        """On the client's loop: the payloads, or why not (a failure is this fetcher's to retry, not an error of
        the loop's task)."""
        transport = self.transport
        try:
            got = await transport._receive_async(self.channel, self.queue, reserved, transport.options.polling_timeout)
        except Exception as exc:  # the credit went back in _receive_async; the hub retries with backoff
            return [], exc
        return got, None

    def _loop_received(self, future: concurrent.futures.Future[tuple[list[dict[str, Any]], Exception | None]]) -> None:
        if future is not self._loop_receive:
            return
        self._loop_receive = None
        if future.cancelled():
            return  # the transport is shutting down
        payloads, exc = future.result()
        if exc is not None:
            if self._stopping:
                self.close()
                return
            delay = backoff_s(self._failures)
            self._failures += 1
            log.warning("receive from %s failed (%s); retrying in %.2fs", self.queue, exc, delay)
            self._cancel_timer()
            self._timer = self.hub.call_later(delay, self._fire)
            return
        self._failures = 0
        self._through_loop = False
        self._deliver(payloads)
        if payloads:  # delivered from the hub's ready callbacks, not from a socket event (see _poke_hub)
            self.transport._poke_hub()
