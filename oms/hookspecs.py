"""Client-side pluggy hooks (project ``orbitmq_client``) for tracing, metrics and auditing around sends/consumes.

Implement them in a plugin (entry-point group ``orbitmq.client_plugins``) or an interceptor object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from oms.message import BytesMessage
    from oms.producer.result import SendResult

PROJECT = "orbitmq_client"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def oms_before_send(message: BytesMessage) -> None:
    """Called on the sending thread before a message is sent (once per message, also for batch members).

    The message already has its ``MESSAGE_ID``; headers added here are sent (e.g. a trace context) and then
    validated like the rest. Raising aborts the send: the exception reaches the caller.
    """


@hookspec
def oms_after_send(message: BytesMessage, result: SendResult | None, error: BaseException | None) -> None:
    """Called once per message that went through ``oms_before_send``: ``result`` on success, else ``error``
    (a message refused by validation after the hook included).

    For ``send`` it runs on the caller's thread; for ``send_async``/``send_oneway`` on a producer callback
    thread, before the future's listeners. Exceptions are logged and do not change the outcome.
    """


@hookspec
def oms_before_consume(messages: Sequence[BytesMessage]) -> None:
    """Called by consumers before the listener receives ``messages`` (one call per delivered batch)."""


@hookspec
def oms_after_consume(messages: Sequence[BytesMessage], success: bool) -> None:
    """Called by consumers after the listener handled ``messages``: ``success`` False means redelivery."""
