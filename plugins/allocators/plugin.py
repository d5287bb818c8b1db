"""The six allocation strategies as a broker plugin answering ``orbitmq_allocate`` for their names.

Registered by the broker as ``allocators``; a third-party plugin may answer other strategy names the same way.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

from broker.hookspecs import QueueRef, hookimpl
from plugins.allocators import AllocateStrategy, canonical_name, create_strategy


class AllocatorPlugin:
    def __init__(self) -> None:
        self._strategy = functools.lru_cache(maxsize=256)(self._create)

    @staticmethod
    def _create(name: str, options: tuple[tuple[str, str], ...]) -> AllocateStrategy | None:
        if canonical_name(name) is None:
            return None  # not ours: another plugin may know the name
        return create_strategy(name, dict(options))

    @hookimpl
    def orbitmq_allocate(
        self,
        strategy: str,
        options: Mapping[str, str],
        group: str,
        current_client: str,
        queues: Sequence[QueueRef],
        clients: Sequence[str],
    ) -> list[QueueRef] | None:
        impl = self._strategy(strategy, tuple(sorted(options.items())))
        if impl is None:
            return None
        return impl.allocate(group, current_client, queues, clients)
