"""Telemetry settings replies: the client's ``Settings`` echoed and merged with server values.

Per client type as protocol-v2 §4.3/§4.4 says: producers need ``publishing.max_body_size``, push consumers a
whole-second long polling timeout, the group's fifo flag and a ``customized_backoff`` retry policy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from orbitmq import limits
from orbitmq.delay import DEFAULT_DELAY_LEVELS_MS
from orbitmq.errors import Code, MQError
from orbitmq.v2.status import ok_status
from orbitmq.validation import validate_group, validate_topic

CONSUMER_TYPES = frozenset(
    {
        definition_pb2.ClientType.PUSH_CONSUMER,
        definition_pb2.ClientType.SIMPLE_CONSUMER,
        definition_pb2.ClientType.PULL_CONSUMER,
        definition_pb2.ClientType.LITE_PUSH_CONSUMER,
        definition_pb2.ClientType.LITE_SIMPLE_CONSUMER,
    }
)


def _default_attempts(group: str) -> int:
    return limits.DEFAULT_MAX_DELIVERY_ATTEMPTS


def _never_fifo(group: str) -> bool:
    return False


@dataclass
class SettingsPolicy:
    """Server-side values merged into settings replies; the broker feeds its config and group table here."""

    max_body_size: int = limits.MAX_MESSAGE_BODY_SIZE
    validate_message_type: bool = True
    long_polling_timeout_s: int = limits.DEFAULT_LONG_POLLING_TIMEOUT_S
    receive_batch_size: int = limits.DEFAULT_RECEIVE_BATCH_SIZE
    max_delivery_attempts: Callable[[str], int] = _default_attempts
    fifo: Callable[[str], bool] = _never_fifo
    consumer_backoff_ms: Sequence[int] = DEFAULT_DELAY_LEVELS_MS  # the default messageDelayLevel ladder
    producer_max_attempts: int = limits.PRODUCER_MAX_ATTEMPTS
    # where clients export their own metrics over OTLP (the broker's metricsGrpcExporterTarget); empty = off
    metric_endpoints: Sequence[tuple[str, int]] = ()


def _duration_ms(ms: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def producer_backoff(policy: SettingsPolicy) -> definition_pb2.RetryPolicy:
    return definition_pb2.RetryPolicy(
        max_attempts=policy.producer_max_attempts,
        exponential_backoff=definition_pb2.ExponentialBackoff(
            initial=_duration_ms(limits.PRODUCER_BACKOFF_INITIAL_MS),
            max=_duration_ms(limits.PRODUCER_BACKOFF_MAX_MS),
            multiplier=limits.PRODUCER_BACKOFF_MULTIPLIER,
        ),
    )


def consumer_backoff(policy: SettingsPolicy, group: str) -> definition_pb2.RetryPolicy:
    # Only customized_backoff is honoured by the Python push consumer (P5), in whole seconds.
    return definition_pb2.RetryPolicy(
        max_attempts=policy.max_delivery_attempts(group),
        customized_backoff=definition_pb2.CustomizedBackoff(
            next=[_duration_ms(ms) for ms in policy.consumer_backoff_ms]
        ),
    )


def validate_settings(settings: definition_pb2.Settings) -> None:
    """What the Java proxy checks of a client's declared settings; BAD_REQUEST-class ``MQError`` naming the field."""
    declared = settings.WhichOneof("pub_sub")
    if declared is None:
        raise MQError(Code.BAD_REQUEST, "settings: there is no publishing or subscription data in settings")
    if declared == "publishing":
        for topic in settings.publishing.topics:
            validate_topic(topic.name)
        return
    validate_group(settings.subscription.group.name)
    for entry in settings.subscription.subscriptions:
        validate_topic(entry.topic.name, allow_system=True)  # %RETRY% topics are subscribed by push consumers


def build_settings(client: definition_pb2.Settings, policy: SettingsPolicy) -> definition_pb2.Settings:
    """The settings to send back for ``client``; BAD_REQUEST for a shape the server cannot serve."""
    reply = definition_pb2.Settings()
    reply.CopyFrom(client)
    # metric on makes the client export its own metrics (send cost, process time...) over OTLP to these (§4.1)
    if policy.metric_endpoints:
        endpoints = definition_pb2.Endpoints(
            scheme=definition_pb2.AddressScheme.IPv4,
            addresses=[definition_pb2.Address(host=h, port=p) for h, p in policy.metric_endpoints],
        )
        reply.metric.CopyFrom(definition_pb2.Metric(on=True, endpoints=endpoints))
    else:
        reply.metric.CopyFrom(definition_pb2.Metric(on=False))
    kind = client.client_type
    if kind == definition_pb2.ClientType.PRODUCER:
        reply.publishing.max_body_size = policy.max_body_size
        reply.publishing.validate_message_type = policy.validate_message_type
        reply.backoff_policy.CopyFrom(producer_backoff(policy))
    elif kind in CONSUMER_TYPES:
        if not client.HasField("subscription"):
            raise MQError(definition_pb2.Code.BAD_REQUEST, "consumer settings without subscription")
        group = client.subscription.group.name
        sub = reply.subscription
        sub.fifo = bool(policy.fifo(group))
        sub.receive_batch_size = policy.receive_batch_size
        polling = client.subscription.long_polling_timeout.seconds
        if kind != definition_pb2.ClientType.SIMPLE_CONSUMER or polling <= 0:
            # Whole seconds only: the push consumer drops nanos and 0 means "no long polling" (P4).
            polling = policy.long_polling_timeout_s
        sub.long_polling_timeout.CopyFrom(duration_pb2.Duration(seconds=int(polling)))
        reply.backoff_policy.CopyFrom(consumer_backoff(policy, group))
    else:
        raise MQError(definition_pb2.Code.UNRECOGNIZED_CLIENT_TYPE, f"unrecognized client type {kind}")
    return reply


def settings_reply(client: definition_pb2.Settings, policy: SettingsPolicy) -> service_pb2.TelemetryCommand:
    """The TelemetryCommand answering a client's settings: status OK (else the client ignores it, P2)."""
    return service_pb2.TelemetryCommand(status=ok_status(), settings=build_settings(client, policy))
