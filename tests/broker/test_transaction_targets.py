"""Who may receive an orphan-transaction check: connected producers that declared the topic, may publish to it and,
when the half message names its producer group, belong to that group."""

from __future__ import annotations

import asyncio

from rocketmq.grpc_protocol import definition_pb2

from broker.transaction_service import check_targets
from orbitmq.v2.telemetry import ClientInfo

PRODUCER = definition_pb2.ClientType.PRODUCER


def _client(client_id: str, topics: tuple[str, ...] = ("T",), group: str = "", connected: bool = True) -> ClientInfo:
    settings = definition_pb2.Settings(
        client_type=PRODUCER,
        publishing=definition_pb2.Publishing(topics=[definition_pb2.Resource(name=t) for t in topics]),
    )
    client = ClientInfo(client_id, PRODUCER, group, frozenset(topics), settings, streams=int(connected))
    client.queue = asyncio.Queue() if connected else None
    return client


def _ids(clients: list[ClientInfo]) -> list[str]:
    return [c.client_id for c in clients]


def test_only_connected_publishers_of_the_topic():
    clients = [_client("a"), _client("other", ("U",)), _client("gone", connected=False)]
    consumer = ClientInfo("c", PRODUCER, "G", frozenset({"T"}), streams=1)  # a heartbeat said producer: no settings
    consumer.queue = asyncio.Queue()
    assert _ids(check_targets([*clients, consumer], "T", "", None)) == ["a"]


def test_the_producer_group_narrows_when_the_message_names_one():
    clients = [_client("a", group="PG"), _client("b", group="other"), _client("c")]
    assert _ids(check_targets(clients, "T", "PG", None)) == ["a"]
    assert _ids(check_targets(clients, "T", "", None)) == ["a", "b", "c"]
    assert check_targets(clients, "T", "unknown-group", None) == []


def test_the_guard_decides_last():
    clients = [_client("a"), _client("b")]
    assert _ids(check_targets(clients, "T", "", lambda c, topic: c.client_id == "b" and topic == "T")) == ["b"]
