"""Listeners and their outcomes: OMS ``on_received(message, context)`` with ``context.ack()``, or RocketMQ's statuses.

A listener says "done" by returning a success status, ``True``, or ``None`` after ``context.ack()`` (or with
auto-ack); it says "again later" by a retry status, ``False``, ``context.reconsume_later()`` or an exception.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from enum import Enum
from typing import Any

from oms.keys import BuiltinKeys
from oms.keyvalue import KeyValue
from oms.message import BytesMessage
from oms.queue import MessageQueue

log = logging.getLogger("oms.consumer")


class ConsumeConcurrentlyStatus(Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


_SUCCESS = frozenset({ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS})
_RETRY = frozenset({ConsumeConcurrentlyStatus.RECONSUME_LATER, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT})
_STATUS_NAMES = {s.value: s for s in (*_SUCCESS, *_RETRY)}


class ConsumeContext:
    """What a listener gets besides the message(s): where they came from, and how to answer.

    - ``ack()`` marks success (OMS ``Context.ack``); ``reconsume_later()`` asks for redelivery.
    - ``delay_level_when_next_consume`` (concurrent, clustering): 0 = the retry ladder, n > 0 = RocketMQ's delay
      level n (1 s, 5 s, 10 s, 30 s, 1 m ...), -1 = straight to ``%DLQ%<group>``.
    - ``suspend_current_queue_time_millis`` (orderly): how long the queue pauses before the same message comes
      again.
    """

    def __init__(self, message_queue: MessageQueue, messages: Sequence[BytesMessage], suspend_ms: int) -> None:
        self.message_queue = message_queue
        self.messages = list(messages)
        self.delay_level_when_next_consume = 0
        self.suspend_current_queue_time_millis = suspend_ms
        self._decision: bool | None = None

    def attributes(self) -> KeyValue:
        """``QUEUE_ID``, ``QUEUE_OFFSET`` (of the first message), ``DESTINATION`` and the broker name."""
        queue = self.message_queue
        kv = KeyValue({BuiltinKeys.DESTINATION: queue.topic, "BROKER_NAME": queue.broker_name})
        first = self.messages[0] if self.messages else None
        if first is not None and first.queue_id is not None:
            kv[BuiltinKeys.QUEUE_ID] = first.queue_id
        elif self.message_queue.queue_id >= 0:
            kv[BuiltinKeys.QUEUE_ID] = self.message_queue.queue_id
        if first is not None and first.queue_offset is not None:
            kv[BuiltinKeys.QUEUE_OFFSET] = first.queue_offset
        return kv

    def ack(self) -> None:
        self._decision = True

    def reconsume_later(self) -> None:
        self._decision = False

    nack = reconsume_later

    def suspend(self, millis: int | None = None) -> None:
        """Orderly: retry the same message after ``millis`` (default: the consumer's suspend time)."""
        if millis is not None:
            self.suspend_current_queue_time_millis = max(0, int(millis))
        self._decision = False

    @property
    def decision(self) -> bool | None:
        return self._decision


def outcome(result: object, context: ConsumeContext, auto_ack: bool) -> bool:
    """True = consumed, False = deliver again, from what the listener returned and did to its context."""
    if isinstance(result, bool):
        return result
    if result in _SUCCESS:
        return True
    if result in _RETRY:
        return False
    if isinstance(result, str) and result.upper() in _STATUS_NAMES:
        return _STATUS_NAMES[result.upper()] in _SUCCESS
    if result is not None:
        log.warning("listener returned %r: treated as %s", result, "success" if auto_ack else "reconsume later")
    if context.decision is not None:
        return context.decision
    return auto_ack


MessageFn = Callable[[BytesMessage, ConsumeContext], object]
BatchFn = Callable[[list[BytesMessage], ConsumeContext], object]


class ListenerAdapter:
    """Calls any supported listener shape and reports one outcome per message."""

    def __init__(self, listener: Any, batch: bool | None = None) -> None:
        self.listener = listener
        fn: Any
        if batch is None:
            batch = callable(getattr(listener, "on_received_batch", None)) or callable(
                getattr(listener, "consume_message", None)
            )
        if batch:
            fn = getattr(listener, "on_received_batch", None) or getattr(listener, "consume_message", None)
        else:
            fn = getattr(listener, "on_received", None) or getattr(listener, "on_message", None)
        if fn is None:
            fn = listener
        if not callable(fn):
            raise TypeError(
                "a listener is a callable (message, context), an object with on_received(message, context), or "
                "(batch=True) a callable (messages, context) / an object with on_received_batch(messages, context)"
            )
        self.batch = batch
        self._fn = fn

    def __call__(
        self,
        messages: Sequence[BytesMessage],
        queue: MessageQueue,
        suspend_ms: int,
        auto_ack: bool,
        stop_on_failure: bool,
        run_async: Callable[[Awaitable[object]], object] | None = None,
    ) -> tuple[list[bool], ConsumeContext]:
        """Outcomes per message, and the (last failed) context: its delay level / suspend time steer the retry.

        A per-message listener is called once per message; with ``stop_on_failure`` (orderly) the messages after a
        failure are not offered and count as failed, since they must not overtake it. An ``async def`` listener's
        coroutine is run by ``run_async`` (on the access point's loop) and its result read the same way.
        """

        def call(arg: Any, context: ConsumeContext) -> object:
            result = self._fn(arg, context)
            if inspect.isawaitable(result):
                if run_async is None:
                    raise TypeError("an async listener needs an event loop to run on")
                result = run_async(result)
            return result

        if self.batch:
            context = ConsumeContext(queue, messages, suspend_ms)
            try:
                ok = outcome(call(list(messages), context), context, auto_ack)
            except Exception:
                log.exception("listener failed on %d message(s) of %s: reconsume later", len(messages), queue)
                ok = False
            return [ok] * len(messages), context
        results: list[bool] = []
        failed: ConsumeContext | None = None
        context = ConsumeContext(queue, messages[:1], suspend_ms)
        for i, message in enumerate(messages):
            context = ConsumeContext(queue, [message], suspend_ms)
            try:
                ok = outcome(call(message, context), context, auto_ack)
            except Exception:
                log.exception("listener failed on message %s of %s: reconsume later", message.message_id, queue)
                ok = False
            results.append(ok)
            if not ok:
                failed = failed or context
                if stop_on_failure:
                    results.extend([False] * (len(messages) - i - 1))
                    break
        return results, failed or context
