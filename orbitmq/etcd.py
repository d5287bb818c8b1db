"""A thin reconnecting wrapper over the ``aetcd`` client: one of several etcd endpoints at a time, the next one
after a failure (the controller and the brokers' failover agents both use it)."""

from __future__ import annotations

import contextlib
from typing import Any

import aetcd


class Etcd:
    def __init__(self, endpoints: list[tuple[str, int]], timeout_s: float) -> None:
        self.endpoints = endpoints
        self.timeout_s = timeout_s
        self._index = 0
        self._client: aetcd.Client | None = None

    @property
    def endpoint(self) -> str:
        host, port = self.endpoints[self._index % len(self.endpoints)]
        return f"{host}:{port}"

    async def client(self) -> Any:
        if self._client is None:
            host, port = self.endpoints[self._index % len(self.endpoints)]
            client = aetcd.Client(host=host, port=port, timeout=self.timeout_s)
            await client.connect()
            self._client = client
        return self._client

    async def reset(self) -> None:
        """After a failed call: drop the connection; the next call tries the next endpoint."""
        client, self._client = self._client, None
        self._index += 1
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
