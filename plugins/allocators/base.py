"""What every allocation strategy shares: the strategy protocol, its error and input rules (the queue reference is
the hook layer's ``QueueRef``). Strategies sort and de-duplicate their inputs themselves, so every broker computing
an assignment agrees."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from broker.hookspecs import QueueRef


class AllocationError(ValueError):
    """A strategy that cannot be built or run as asked: unknown name, bad options, empty current client id."""


@runtime_checkable
class AllocateStrategy(Protocol):
    """RocketMQ's AllocateMessageQueueStrategy: which of ``mq_all`` the member ``current_cid`` consumes."""

    @property
    def name(self) -> str:
        """The canonical strategy name (one of ``STRATEGY_NAMES``)."""
        ...

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        """The queues ``current_cid`` consumes, sorted; [] when it is not among ``cid_all`` or there are no queues.

        Raises AllocationError when ``current_cid`` is empty."""
        ...


def prepare(
    group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
) -> tuple[list[QueueRef], list[str]] | None:
    """RocketMQ's ``check`` plus the sort RebalanceImpl does before calling a strategy.

    Returns the sorted, de-duplicated (queues, client ids), or None when ``current_cid`` gets nothing: no queues,
    or it is not a live member (RocketMQ logs "[BUG] ... not in cidAll" and returns an empty list)."""
    if not current_cid:
        raise AllocationError(f"group {group!r}: the current client id is empty")
    cids = sorted(set(cid_all))
    if not mq_all or current_cid not in cids:
        return None
    return sorted(set(mq_all)), cids


def broker_room(broker_name: str) -> str | None:
    """The machine room of a broker named ``room@name``, None for any other shape.

    Mirrors RocketMQ's ``brokerName.split("@").length == 2``: exactly one ``@`` and a non-empty name after it
    (Java's split drops trailing empty parts, so ``room@`` has no room). The room itself may be ""."""
    room, sep, rest = broker_name.partition("@")
    if not sep or not rest or "@" in rest:
        return None
    return room


def client_room(client_id: str) -> str | None:
    """The machine room of a client: the non-empty prefix of its id before the first ``@``, else None.

    Official RocketMQ 5 clients use ``hostname@pid@index@time`` ids, so by default their room is their host name;
    a deployment that wants real rooms names its clients ``room@...``."""
    room, sep, _ = client_id.partition("@")
    return room if sep and room else None


def lowercase_keys(options: Mapping[str, str] | None) -> dict[str, str]:
    """Options with their keys stripped and lower-cased: group configs are typed by hand (``virtualNodeCnt``)."""
    return {str(k).strip().lower(): str(v) for k, v in (options or {}).items()}
