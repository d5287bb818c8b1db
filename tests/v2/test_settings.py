"""Settings replies per client type, built like the official Python client 5.1.2 sends them (protocol §4.2)."""

from __future__ import annotations

import pytest
from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2 as d

from orbitmq.errors import MQError
from orbitmq.v2.settings import SettingsPolicy, build_settings, settings_reply

OK = d.Code.OK


def _common(kind: int) -> d.Settings:
    return d.Settings(
        client_type=kind,
        access_point=d.Endpoints(scheme=d.AddressScheme.IPv4, addresses=[d.Address(host="127.0.0.1", port=8081)]),
        request_timeout=duration_pb2.Duration(seconds=3),
        user_agent=d.UA(language=d.Language.PYTHON, version="5.1.2", platform="Linux 6", hostname="10.0.0.1"),
        metric=d.Metric(on=False),
    )


def producer_settings(*topics: str) -> d.Settings:
    s = _common(d.ClientType.PRODUCER)
    s.publishing.CopyFrom(
        d.Publishing(topics=[d.Resource(name=t) for t in topics], max_body_size=134217728, validate_message_type=True)
    )
    return s


def consumer_settings(kind: int, group: str, topic: str, polling_s: int | None = None) -> d.Settings:
    s = _common(kind)
    sub = d.Subscription(
        group=d.Resource(name=group),
        subscriptions=[
            d.SubscriptionEntry(
                topic=d.Resource(name=topic), expression=d.FilterExpression(type=d.FilterType.TAG, expression="*")
            )
        ],
    )
    if polling_s is not None:
        sub.long_polling_timeout.CopyFrom(duration_pb2.Duration(seconds=polling_s))
    s.subscription.CopyFrom(sub)
    return s


def test_producer_reply_has_max_body_size_and_exponential_backoff() -> None:
    reply = settings_reply(producer_settings("t1", "t2"), SettingsPolicy(max_body_size=1234))
    assert reply.status.code == OK
    s = reply.settings
    assert s.client_type == d.ClientType.PRODUCER
    assert s.publishing.max_body_size == 1234
    assert s.publishing.validate_message_type is True
    assert [t.name for t in s.publishing.topics] == ["t1", "t2"]
    assert s.backoff_policy.max_attempts == 3
    assert s.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
    assert s.backoff_policy.exponential_backoff.initial.ToMilliseconds() == 10
    assert s.backoff_policy.exponential_backoff.max.ToMilliseconds() == 1000
    assert s.metric.on is False
    assert s.user_agent.version == "5.1.2"


def test_push_consumer_gets_policy_polling_fifo_per_group_and_customized_backoff() -> None:
    policy = SettingsPolicy(
        long_polling_timeout_s=7,
        fifo=lambda g: g == "fifo-group",
        max_delivery_attempts=lambda g: 3 if g == "fifo-group" else 17,
    )
    plain = build_settings(consumer_settings(d.ClientType.PUSH_CONSUMER, "g", "t"), policy)
    assert plain.subscription.fifo is False
    assert plain.subscription.long_polling_timeout.seconds == 7
    assert plain.subscription.long_polling_timeout.nanos == 0
    assert plain.subscription.receive_batch_size == 32
    assert plain.backoff_policy.WhichOneof("strategy") == "customized_backoff"
    assert plain.backoff_policy.max_attempts == 17
    delays = [n.seconds for n in plain.backoff_policy.customized_backoff.next]
    assert delays[:4] == [1, 5, 10, 30] and delays[-1] == 7200 and len(delays) == 18
    assert plain.subscription.group.name == "g"
    assert plain.subscription.subscriptions[0].topic.name == "t"

    fifo = build_settings(consumer_settings(d.ClientType.PUSH_CONSUMER, "fifo-group", "t"), policy)
    assert fifo.subscription.fifo is True
    assert fifo.backoff_policy.max_attempts == 3


def test_simple_consumer_keeps_its_await_duration_and_gets_default_when_missing() -> None:
    policy = SettingsPolicy(long_polling_timeout_s=20)
    own = build_settings(consumer_settings(d.ClientType.SIMPLE_CONSUMER, "g", "t", polling_s=5), policy)
    assert own.subscription.long_polling_timeout.seconds == 5
    default = build_settings(consumer_settings(d.ClientType.SIMPLE_CONSUMER, "g", "t"), policy)
    assert default.subscription.long_polling_timeout.seconds == 20


def test_consumer_without_subscription_and_unknown_type_are_rejected_with_codes() -> None:
    with pytest.raises(MQError) as bad:
        build_settings(_common(d.ClientType.PUSH_CONSUMER), SettingsPolicy())
    assert bad.value.code == d.Code.BAD_REQUEST
    with pytest.raises(MQError) as unknown:
        build_settings(_common(d.ClientType.CLIENT_TYPE_UNSPECIFIED), SettingsPolicy())
    assert unknown.value.code == d.Code.UNRECOGNIZED_CLIENT_TYPE


def test_reply_does_not_modify_the_client_settings() -> None:
    client = producer_settings("t")
    settings_reply(client, SettingsPolicy(max_body_size=1))
    assert client.publishing.max_body_size == 134217728
    assert not client.HasField("backoff_policy")
