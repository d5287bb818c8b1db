"""``MessagingAccessPoint``: parsed URL + attributes, the shared loop/channels, and the factory of clients.

Shutting it down shuts down every client it created, then closes the channels and stops the loop thread. Clients
see it only through ``oms.context.ClientContext``; this module is the one that imports them.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import Any, TypeVar

import grpc

from oms.admin.manager import ResourceManager
from oms.client.core import Runtime
from oms.client.endpoints import Endpoint
from oms.client.headers import Credentials
from oms.client.identity import local_host
from oms.client.loop import LoopThread
from oms.client.rpc import ChannelPool
from oms.consumer.config import consumer_attributes
from oms.consumer.pull import PullConsumer
from oms.consumer.push import PushConsumer
from oms.context import Lifecycle
from oms.errors import OMSIllegalStateException, OMSNotSupportedException
from oms.keys import NonStandardKeys, OMSBuiltinKeys, attribute_key
from oms.keyvalue import KeyValue
from oms.plugins import ClientPluginManager
from oms.producer.aio import AsyncProducer
from oms.producer.producer import Producer
from oms.producer.transaction import Checker
from oms.url import AccessPointURL, parse_access_point
from oms.version import CLIENT_VERSION
from orbitmq.errors import Code
from orbitmq.tls import client_credentials

log = logging.getLogger("oms")

DRIVER = "rocketmq"
LOAD_PLUGINS_KEY = "oms.load.plugins"  # "false" skips the orbitmq.client_plugins entry points
STOP_TIMEOUT_S = 10.0
_live: weakref.WeakSet[MessagingAccessPoint] = weakref.WeakSet()
_C = TypeVar("_C", bound="Lifecycle")


@atexit.register
def _shutdown_forgotten() -> None:
    """Access points still running at interpreter exit are shut down (brokers hear goodbye, threads end)."""
    for ap in list(_live):
        ap.shutdown()


def _forget_inherited() -> None:
    """In a forked child the parent's access points are dead: their loop thread did not survive the fork and gRPC
    cannot use (or cleanly close) the parent's channels, so exit must not try to shut them down."""
    _live.clear()


os.register_at_fork(after_in_child=_forget_inherited)


def _tls_credentials(attributes: KeyValue) -> grpc.ChannelCredentials | None:
    """Channel credentials from the ``rmq.tls.*`` attributes; None (plaintext) unless ``rmq.tls.enable``."""
    if not attributes.get_boolean(NonStandardKeys.TLS_ENABLE, False):
        return None
    return client_credentials(
        attributes.get_string(NonStandardKeys.TLS_TRUST_CERT_PATH) or "",
        attributes.get_string(NonStandardKeys.TLS_CERT_PATH) or "",
        attributes.get_string(NonStandardKeys.TLS_KEY_PATH) or "",
        keys=(NonStandardKeys.TLS_TRUST_CERT_PATH, NonStandardKeys.TLS_CERT_PATH, NonStandardKeys.TLS_KEY_PATH),
    )


def merge_attributes(attributes: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> KeyValue:
    """``attributes`` plus keyword sugar (``operation_timeout=3000`` -> ``OPERATION_TIMEOUT``)."""
    kv = KeyValue(attributes)
    for name, value in kwargs.items():
        if value is not None:
            kv[attribute_key(name)] = value
    return kv


class MessagingAccessPoint:
    def __init__(self, url: AccessPointURL, attributes: KeyValue) -> None:
        if url.driver != DRIVER:
            raise OMSNotSupportedException(Code.NOT_IMPLEMENTED, f"OMS driver {url.driver!r} (only {DRIVER!r} exists)")
        self.url = url
        self._attributes = attributes
        attributes[OMSBuiltinKeys.ACCESS_POINTS] = url.addresses
        attributes[OMSBuiltinKeys.DRIVER_IMPL] = DRIVER
        if url.account and OMSBuiltinKeys.ACCOUNT_ID not in attributes:
            attributes[OMSBuiltinKeys.ACCOUNT_ID] = url.account
        # REGION given as an attribute wins over the URL path, as OMS Java lets attributes override the URL
        self.namespace = attributes.get_string(OMSBuiltinKeys.REGION) or url.namespace
        attributes[OMSBuiltinKeys.REGION] = self.namespace
        key = attributes.get_string(OMSBuiltinKeys.ACCOUNT_KEY)
        secret = attributes.get_string(OMSBuiltinKeys.ACCOUNT_SECRET)
        if bool(key) != bool(secret):
            raise ValueError(f"give both {OMSBuiltinKeys.ACCOUNT_KEY} and {OMSBuiltinKeys.ACCOUNT_SECRET}, or neither")
        self.credentials = Credentials(key, secret) if key and secret else None
        self.plugin_manager = ClientPluginManager(load_entry_points=attributes.get_boolean(LOAD_PLUGINS_KEY, True))
        self._loop = LoopThread(f"oms-access-point-{id(self):x}")
        frames = attributes.get_boolean(NonStandardKeys.FRAMES_ENABLE, True)
        pool = ChannelPool(_tls_credentials(attributes), frames=frames)
        self._runtime = Runtime(self._loop, pool, Endpoint.of(url.endpoints), self.namespace, self.credentials)
        self._children: list[Lifecycle] = []
        self._lock = threading.Lock()
        self._closed = False

    # -- OMS API ------------------------------------------------------------------------------------------------

    def attributes(self) -> KeyValue:
        return self._attributes

    def impl_version(self) -> str:
        return CLIENT_VERSION

    @property
    def is_running(self) -> bool:
        return self._loop.running

    def startup(self) -> MessagingAccessPoint:
        with self._lock:
            if self._closed:
                raise OMSIllegalStateException("the access point was shut down; get a new one")
            self._loop.start()
            _live.add(self)
        return self

    def shutdown(self) -> None:
        """Shut down every client created here, then the channels and the loop thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            children = list(self._children)
        _live.discard(self)
        for child in reversed(children):
            try:
                child.shutdown()
            except Exception:  # one client failing to stop must not keep the others running
                log.exception("shutting down %r failed", child)
        if self._loop.running and not self._loop.in_loop():
            try:
                self._loop.run(self._runtime.pool.close(), STOP_TIMEOUT_S)
            except Exception as exc:  # the loop is stopped next either way
                log.warning("closing channels failed: %r", exc)
        self._loop.stop(STOP_TIMEOUT_S)

    def __enter__(self) -> MessagingAccessPoint:
        return self.startup()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    # -- factories ----------------------------------------------------------------------------------------------

    def create_producer(
        self,
        attributes: Mapping[str, Any] | None = None,
        *,
        transaction_checker: Checker | None = None,
        **kwargs: Any,
    ) -> Producer:
        """A producer (not started): attributes from ``attributes`` plus keyword sugar, e.g.
        ``create_producer(operation_timeout=3000, retry_times_when_send_failed=1, send_latency_fault_enable=True)``.
        """
        merged = KeyValue(self._attributes)
        merged.update(merge_attributes(attributes, kwargs))
        return self._adopt(Producer(self, merged, transaction_checker))

    def create_async_producer(
        self,
        attributes: Mapping[str, Any] | None = None,
        *,
        transaction_checker: Checker | None = None,
        **kwargs: Any,
    ) -> AsyncProducer:
        """``create_producer(...).aio()``: ``async with ap.create_async_producer() as p: await p.send(msg)``."""
        return self.create_producer(attributes, transaction_checker=transaction_checker, **kwargs).aio()

    def create_push_consumer(self, attributes: Mapping[str, Any] | None = None, **kwargs: Any) -> PushConsumer:
        """A push consumer (not started): ``create_push_consumer(consumer_id="G", message_model="BROADCASTING",
        consume_from_where="first", consume_thread_nums=8, orderly=True, ...)``; keys in docs/oms.md "Consumers".
        """
        return self._adopt(PushConsumer(self, consumer_attributes(self._attributes, attributes, kwargs)))

    def create_pull_consumer(self, attributes: Mapping[str, Any] | None = None, **kwargs: Any) -> PullConsumer:
        """A pull consumer (not started): ``receive()``/``ack()`` and the queue-level ``pull``/``commit`` API."""
        return self._adopt(PullConsumer(self, consumer_attributes(self._attributes, attributes, kwargs)))

    def resource_manager(self, attributes: Mapping[str, Any] | None = None, **kwargs: Any) -> ResourceManager:
        """The admin API (topics, groups, offsets, message queries, dead letters); ``with`` closes it. See
        docs/oms.md "Resource manager and mqadmin"; ``operation_timeout=`` (ms) bounds each call to a server.
        """
        merged = KeyValue(self._attributes)
        merged.update(merge_attributes(attributes, kwargs))
        return self._adopt(ResourceManager(self, merged))

    def _adopt(self, child: _C) -> _C:
        with self._lock:
            if self._closed:
                raise OMSIllegalStateException("the access point was shut down")
            self._children.append(child)
        return child

    # -- oms.context.ClientContext: what its clients use -------------------------------------------------------

    def born_host(self) -> str:
        return local_host(self.url.endpoints[0])

    def start_client(self, client: Lifecycle) -> Runtime:
        self.startup()
        return self._runtime

    def forget_client(self, client: Lifecycle) -> None:
        with self._lock:
            if client in self._children:
                self._children.remove(client)

    def __repr__(self) -> str:
        return f"MessagingAccessPoint({self.url.driver}://{self.url.addresses}/{self.namespace})"


def get_messaging_access_point(
    url: str,
    attributes: Mapping[str, Any] | None = None,
    *,
    access_key: str | None = None,
    secret_key: str | None = None,
    **kwargs: Any,
) -> MessagingAccessPoint:
    """``OMS.getMessagingAccessPoint``: ``oms:rocketmq://host:port[;host:port]/namespace``.

    With no host in the URL, ``NAMESRV_ADDR`` is used. Credentials: ``ACCOUNT_KEY``/``ACCOUNT_SECRET`` attributes or
    ``access_key=``/``secret_key=``; other keywords map to attribute keys (``operation_timeout=`` ...).
    """
    parsed = parse_access_point(url)
    kv = merge_attributes(attributes, {**kwargs, "access_key": access_key, "secret_key": secret_key})
    return MessagingAccessPoint(parsed, kv)
