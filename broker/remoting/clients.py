"""Remoting clients known from their HEART_BEATs: which consumer groups they are in, what they subscribe to, and
when they were last heard from (RocketMQ's ConsumerManager for 4.x clients)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.hookspecs import RemotingCredentials


@dataclass
class RemotingClient:
    client_id: str
    peer: str
    language: str
    version: int
    groups: set[str] = field(default_factory=set)  # consumer groups
    producer_groups: set[str] = field(default_factory=set)
    subscriptions: dict[tuple[str, str], str] = field(default_factory=dict)  # (group, topic) -> tag expression
    consumer_data: dict[str, dict[str, Any]] = field(default_factory=dict)  # group -> its HEART_BEAT ConsumerData
    credentials: RemotingCredentials | None = None  # with ACL on: the last HEART_BEAT's (who the client is)
    last_seen: float = 0.0


class RemotingClients:
    def __init__(self, expire_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.expire_s = expire_s
        self.clock = clock
        self._clients: dict[str, RemotingClient] = {}

    def heartbeat(
        self,
        data: dict[str, Any],
        peer: str,
        language: str,
        version: int,
        credentials: RemotingCredentials | None = None,
    ) -> set[str]:
        """Record a HEART_BEAT body; returns the consumer groups whose membership or subscriptions changed (those
        RocketMQ's ConsumerManager notifies)."""
        client_id = str(data.get("clientID") or peer)
        client = self._clients.get(client_id)
        if client is None:
            client = self._clients[client_id] = RemotingClient(client_id, peer, language, version)
        client.peer = peer  # a reconnected client: the broker's own requests go to its current connection
        client.credentials = credentials
        before = set(client.groups)
        before_subs = dict(client.subscriptions)
        client.groups = set()
        client.subscriptions = {}
        client.consumer_data = {}
        for consumer in data.get("consumerDataSet") or []:
            group = str(consumer.get("groupName", ""))
            if not group:
                continue
            client.groups.add(group)
            client.consumer_data[group] = consumer
            for sub in consumer.get("subscriptionDataSet") or []:
                client.subscriptions[(group, str(sub.get("topic", "")))] = str(sub.get("subString") or "*")
        client.producer_groups = {str(p.get("groupName", "")) for p in data.get("producerDataSet") or []}
        client.last_seen = self.clock()
        resubscribed = {g for (g, t) in before_subs.keys() | client.subscriptions.keys()
                        if before_subs.get((g, t)) != client.subscriptions.get((g, t))}  # fmt: skip
        return (before ^ client.groups) | (resubscribed & client.groups)

    def unregister(self, client_id: str, consumer_group: str = "", producer_group: str = "") -> set[str]:
        """UNREGISTER_CLIENT: the named groups only (RocketMQ's header names one consumer and/or one producer group),
        the whole client when it names none or nothing is left; returns the consumer groups it left."""
        client = self._clients.get(client_id)
        if client is None:
            return set()
        if not consumer_group and not producer_group:
            del self._clients[client_id]
            return set(client.groups)
        left = {consumer_group} & client.groups
        client.groups -= left
        client.producer_groups.discard(producer_group)
        client.subscriptions = {k: v for k, v in client.subscriptions.items() if k[0] not in left}
        for group in left:
            client.consumer_data.pop(group, None)
        if not client.groups and not client.producer_groups:
            del self._clients[client_id]
        return left

    def disconnected(self, peer: str) -> set[str]:
        """The connection of ``peer`` closed: its clients are gone (RocketMQ's channel close event); returns their
        consumer groups."""
        gone = [c for c in self._clients.values() if c.peer == peer]
        for c in gone:
            del self._clients[c.client_id]
        return {g for c in gone for g in c.groups}

    def expire(self) -> set[str]:
        """Drop clients not heard from within ``expire_s``; returns their consumer groups."""
        now = self.clock()
        gone = [c for c in self._clients.values() if now - c.last_seen > self.expire_s]
        for c in gone:
            del self._clients[c.client_id]
        return {g for c in gone for g in c.groups}

    def _alive(self) -> list[RemotingClient]:
        # filtered, not dropped: the housekeeping's expire() drops them and notifies their groups
        now = self.clock()
        return [c for c in self._clients.values() if now - c.last_seen <= self.expire_s]

    def all(self) -> list[RemotingClient]:
        return self._alive()

    def consumers(self, group: str) -> list[RemotingClient]:
        return [c for c in self._alive() if group in c.groups]

    def producers(self, group: str) -> list[RemotingClient]:
        return [c for c in self._alive() if group in c.producer_groups]

    def get(self, client_id: str) -> RemotingClient | None:
        return self._clients.get(client_id)

    def consumer_ids(self, group: str) -> list[str]:
        return sorted(c.client_id for c in self._alive() if group in c.groups)

    def subscription(self, group: str, topic: str) -> str | None:
        """The tag expression one of the group's clients declared for ``topic`` (None when none did)."""
        for c in self._alive():
            expression = c.subscriptions.get((group, topic))
            if expression is not None:
                return expression
        return None
