"""The slave's HAClient: connects to the master's ``haListenPort``, reports its CommitLog end, stores what the
master streams byte for byte and dispatches it (RocketMQ's HAClient + reput), reconnecting after any failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.ha.protocol import FRAME, REPORT, ConnectionKind, FrameHeader, Hello, ProtocolError
from broker.store.commitlog import ReplicaError
from broker.store.message_store import DefaultMessageStore
from orbitmq.logging import get_logger

log = get_logger("broker.ha.slave")
RECONNECT_DELAY_S = 0.5


@dataclass(frozen=True)
class HASlaveConfig:
    heartbeat_interval_s: float
    housekeeping_interval_s: float


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"haMasterAddress {addr!r} is not host:port")
    return host, int(port)


class HAClient:
    def __init__(self, store: DefaultMessageStore, config: HASlaveConfig, master_addr: Callable[[], str]) -> None:
        self.store = store
        self.config = config
        self._master_addr = master_addr
        self.epoch = 0  # controller mode: the epoch of the master to follow (an older master is refused)
        self.broker_id = -1
        self.master_max_offset = -1  # the master's CommitLog end as its last frame said; -1 = never heard
        self.connected_to = ""
        self.last_frame_at = 0.0
        self._task: asyncio.Task[None] | None = None

    @property
    def lag_bytes(self) -> int:
        if self.master_max_offset < 0:
            return -1
        return max(0, self.master_max_offset - self.store.get_max_phy_offset())

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ha-client")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self.connected_to = ""

    async def _run(self) -> None:
        logged_waiting = False
        while True:
            addr = self._master_addr()
            if not addr:
                if not logged_waiting:
                    log.info("waiting for the master's HA address (haMasterAddress or the name servers)")
                    logged_waiting = True
                await asyncio.sleep(RECONNECT_DELAY_S)
                continue
            try:
                await self._replicate(addr)
            except (ProtocolError, ReplicaError, ValueError) as exc:
                log.error("replication from master failed", master=addr, error=str(exc))
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                if self.connected_to:
                    log.warning("replication connection lost", master=addr, error=repr(exc))
            self.connected_to = ""
            await asyncio.sleep(RECONNECT_DELAY_S)

    async def _replicate(self, addr: str) -> None:
        host, port = split_addr(addr)
        timeout = self.config.housekeeping_interval_s
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        try:
            store = self.store
            hello = Hello(ConnectionKind.REPLICATE, store.config.mappedFileSizeCommitLog, self.epoch, self.broker_id)
            writer.write(hello.encode())
            writer.write(REPORT.pack(store.get_max_phy_offset()))
            await writer.drain()
            self.connected_to = addr
            log.info("replicating from master", master=addr, offset=store.get_max_phy_offset())
            while True:
                header = FrameHeader.decode(await asyncio.wait_for(reader.readexactly(FRAME.size), timeout))
                self.master_max_offset = header.master_max_offset
                self.last_frame_at = time.monotonic()
                if header.length:
                    body = await asyncio.wait_for(reader.readexactly(header.length), timeout)
                    end = store.append_replica(header.offset, body, header.blank)
                else:
                    end = store.get_max_phy_offset()
                writer.write(REPORT.pack(end))
                if writer.transport.get_write_buffer_size() > 64 * 1024:
                    await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def runtime_info(self) -> dict[str, str]:
        return {
            "haMasterAddress": self.connected_to,
            "haMasterMaxOffset": str(self.master_max_offset),
            "haSlaveLagBytes": str(self.lag_bytes),
        }
