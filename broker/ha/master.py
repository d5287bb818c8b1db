"""The master's HAService: accepts slaves on ``haListenPort``, streams each its CommitLog from the offset it
reports, and tells SYNC_MASTER puts when a slave has their records (RocketMQ's HAService/HAConnection/GroupTransfer).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.ha.protocol import (
    FLAG_BLANK,
    HELLO,
    REPORT,
    ConnectionKind,
    FrameHeader,
    Hello,
    ProtocolError,
    encode_metadata,
)
from broker.store.commitlog import ReplicaError
from broker.store.message_store import DefaultMessageStore
from broker.store.results import PutMessageResult, PutMessageStatus, PutResults
from orbitmq.logging import get_logger

log = get_logger("broker.ha.master")


@dataclass(frozen=True)
class HAMasterConfig:
    host: str
    port: int
    transfer_batch_size: int
    heartbeat_interval_s: float
    housekeeping_interval_s: float
    sync_timeout_s: float  # syncFlushTimeout: how long a SYNC_MASTER put waits for a slave
    fallbehind_max: int  # haSlaveFallbehindMax: a slave further behind does not count as available
    min_in_sync_replicas: int = 1  # minInSyncReplicas: replicas (the master included) a SYNC_MASTER put needs
    all_ack_in_sync: bool = False  # allAckInSyncStateSet: every in-sync slave confirms, not just one


@dataclass
class SlaveConnection:
    """One slave's replication stream, as the master sees it."""

    addr: str
    broker_id: int = -1
    caught_up: bool = False  # has reached the master's end once: a member of the SyncStateSet while connected
    acked_offset: int = -1  # the slave's CommitLog end as last reported; -1 before its first report
    sent_offset: int = 0
    connected_at: float = field(default_factory=time.monotonic)
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class HAService:
    def __init__(
        self, store: DefaultMessageStore, config: HAMasterConfig, metadata: Callable[[], dict[str, Any]]
    ) -> None:
        self.store = store
        self.config = config
        self._metadata = metadata
        self.slaves: list[SlaveConnection] = []
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []  # (end offset, seq, future) heap
        self._seq = itertools.count()
        self._tasks: set[asyncio.Task[None]] = set()
        self.push_offset = -1  # RocketMQ's push2SlaveMaxOffset: the highest end any slave confirmed
        # Controller mode with the SyncStateSet (in etcd) holding the master alone: a SYNC_MASTER put needs no slave
        # (RocketMQ 5's minInSyncReplicas=1); only a member of that set can be elected, so nothing acked is lost.
        self.solo_ack = False
        self.epoch = 0  # controller mode: the epoch this broker is master of; slaves knowing a later one are refused

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> int:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.store.add_arriving_listener(self._on_arrival)
        self._server = await asyncio.start_server(self._on_connection, self.config.host, self.config.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HA service listening", port=self.port)
        return self.port

    async def shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self.drop_slaves()

    # ------------------------------------------------------------------ SYNC_MASTER
    def gate(self, put: asyncio.Future[Any]) -> asyncio.Future[Any]:
        """The store's ``put_gate``: the put's answer once a slave has its records (or the slave status)."""
        return asyncio.ensure_future(self._answer_after_slave(put))

    async def _answer_after_slave(self, put: asyncio.Future[Any]) -> Any:
        answer = await put
        results: Sequence[PutMessageResult] = [answer] if isinstance(answer, PutMessageResult) else answer
        end = _end_offset(results)
        if end is None:
            return answer
        status = await self.wait_for_slave(end)
        if status is None:
            return answer
        reason = (
            "no slave is in sync to confirm the message (stored on the master only)"
            if status is PutMessageStatus.SLAVE_NOT_AVAILABLE
            else f"no slave confirmed the message within syncFlushTimeout {self.config.sync_timeout_s * 1000:.0f} ms"
        )
        if isinstance(answer, PutMessageResult):
            return PutMessageResult(status, answer.append_result, reason) if answer.ok else answer
        return _with_status(answer, status, reason)

    async def wait_for_slave(self, end_offset: int) -> PutMessageStatus | None:
        """None once a slave has everything before ``end_offset`` (every in-sync slave with allAckInSyncStateSet);
        otherwise why not (RocketMQ's statuses)."""
        if 1 + len(self.in_sync_slaves()) < self.config.min_in_sync_replicas:
            return PutMessageStatus.SLAVE_NOT_AVAILABLE  # RocketMQ's IN_SYNC_REPLICAS_NOT_ENOUGH
        if self.push_offset >= end_offset or (self.solo_ack and self.config.min_in_sync_replicas <= 1):
            return None
        if not self._slave_available(end_offset):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        assert self._loop is not None
        fut: asyncio.Future[bool] = self._loop.create_future()
        heapq.heappush(self._waiters, (end_offset, next(self._seq), fut))
        try:
            async with asyncio.timeout(self.config.sync_timeout_s):
                ok = await fut
        except TimeoutError:
            return PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return None if ok else PutMessageStatus.SLAVE_NOT_AVAILABLE

    def _slave_available(self, end_offset: int) -> bool:
        return any(
            s.acked_offset >= 0 and end_offset - s.acked_offset <= self.config.fallbehind_max for s in self.slaves
        )

    def _confirmed(self) -> int:
        """What the waiters may count as replicated: the furthest any slave acked, or with allAckInSyncStateSet the
        least any in-sync slave acked (a slave still catching up does not hold puts back: it is not in sync)."""
        if not self.config.all_ack_in_sync:
            return max((s.acked_offset for s in self.slaves), default=-1)
        in_sync = [s.acked_offset for s in self.slaves if s.caught_up]
        if in_sync:
            return min(in_sync)
        return max((s.acked_offset for s in self.slaves), default=-1)  # none in sync yet: as without the key

    def _on_ack(self, offset: int) -> None:
        offset = min(offset, self._confirmed()) if self.config.all_ack_in_sync else offset
        if offset <= self.push_offset:
            return
        self.push_offset = offset
        waiters = self._waiters
        while waiters and waiters[0][0] <= offset:
            _, _, fut = heapq.heappop(waiters)
            if not fut.done():
                fut.set_result(True)

    # ------------------------------------------------------------------ replication
    def _on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if not self.slaves:
            return
        if threading.get_ident() == self._loop_thread:
            self._wake_all()
        elif self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for s in self.slaves:
            s.wake.set()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        peer = writer.get_extra_info("peername")
        addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        try:
            hello = Hello.decode(
                await asyncio.wait_for(reader.readexactly(HELLO.size), self.config.housekeeping_interval_s)
            )
            if hello.kind is ConnectionKind.METADATA:
                writer.write(encode_metadata(self._metadata()))
                await self._send_metadata(writer, addr)
                return
            size = self.store.config.mappedFileSizeCommitLog
            if hello.epoch > self.epoch:
                raise ProtocolError(
                    f"slave knows epoch {hello.epoch}, this master only {self.epoch}: a newer master exists"
                )
            if hello.segment_size != size:
                raise ProtocolError(
                    f"slave mappedFileSizeCommitLog {hello.segment_size} differs from the master's {size}"
                )
            await self._replicate(SlaveConnection(addr, hello.broker_id), reader, writer)
        except (ProtocolError, ReplicaError) as exc:
            log.error("replication connection refused", slave=addr, error=str(exc))
        except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
            log.warning("replication connection lost", slave=addr, error=repr(exc))
        except asyncio.CancelledError:
            # shutdown or stepping down ended this stream: return normally, or asyncio's stream server logs the
            # cancelled handler as an error
            log.info("replication connection closed", slave=addr)
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()

    async def _send_metadata(self, writer: asyncio.StreamWriter, addr: str) -> None:
        """Wait for the answer to leave, for at most a housekeeping interval: a peer that asked for the metadata and
        does not read it (up to 64 MiB) is dropped as a silent slave is, instead of holding a task and the buffered
        answer for as long as its connection stays open."""
        try:
            await asyncio.wait_for(writer.drain(), self.config.housekeeping_interval_s)
        except TimeoutError:
            log.warning(
                "metadata answer not taken, connection dropped",
                peer=addr,
                waited_s=self.config.housekeeping_interval_s,
                unsent_bytes=writer.transport.get_write_buffer_size(),
            )

    async def _replicate(
        self, slave: SlaveConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        (reported,) = REPORT.unpack(
            await asyncio.wait_for(reader.readexactly(REPORT.size), self.config.housekeeping_interval_s)
        )
        master_max = self.store.get_max_phy_offset()
        if reported > master_max:
            raise ReplicaError(f"slave has {reported} bytes of commitlog, more than the master's {master_max}")
        # An empty slave starts at the oldest segment the master keeps: a full copy, so it can serve every read.
        start = reported if reported > 0 else self.store.get_min_phy_offset()
        if start < self.store.get_min_phy_offset():
            raise ReplicaError(
                f"slave resumes at {start}, but the master's commitlog now starts at {self.store.get_min_phy_offset()}"
            )
        slave.acked_offset = reported
        slave.sent_offset = start
        self.slaves.append(slave)
        log.info("slave connected", slave=slave.addr, offset=start, master_max_offset=master_max)
        reports = asyncio.create_task(self._read_reports(slave, reader), name=f"ha-reports-{slave.addr}")
        try:
            self._on_ack(reported)
            await self._transfer(slave, writer, reports)
        finally:
            reports.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reports
            self.slaves.remove(slave)
            log.info("slave disconnected", slave=slave.addr, acked_offset=slave.acked_offset)

    async def _read_reports(self, slave: SlaveConnection, reader: asyncio.StreamReader) -> None:
        while True:
            data = await asyncio.wait_for(reader.readexactly(REPORT.size), self.config.housekeeping_interval_s)
            (slave.acked_offset,) = REPORT.unpack(data)
            if not slave.caught_up and slave.acked_offset >= self.store.get_max_phy_offset():
                slave.caught_up = True
            self._on_ack(slave.acked_offset)

    async def _transfer(
        self, slave: SlaveConnection, writer: asyncio.StreamWriter, reports: asyncio.Task[None]
    ) -> None:
        cfg = self.config
        segment = self.store.config.mappedFileSizeCommitLog
        while not reports.done():
            slave.wake.clear()
            chunk = self.store.read_replica_chunk(slave.sent_offset, cfg.transfer_batch_size)
            if chunk is None:
                if slave.sent_offset < self.store.get_min_phy_offset():
                    raise ReplicaError(f"offset {slave.sent_offset} was deleted by retention before the slave had it")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(slave.wake.wait(), cfg.heartbeat_interval_s)
                if not slave.wake.is_set():  # idle: an empty frame keeps the slave's housekeeping quiet
                    header = FrameHeader(slave.sent_offset, self.store.get_max_phy_offset(), 0, 0)
                    writer.write(header.encode())
                    await _drain(writer, reports)
                continue
            data, blank = chunk
            header = FrameHeader(
                slave.sent_offset, self.store.get_max_phy_offset(), len(data), FLAG_BLANK if blank else 0
            )
            writer.write(header.encode())
            writer.write(data)
            await _drain(writer, reports)  # back-pressure: at most one chunk plus the socket buffers per slave
            slave.sent_offset = (
                slave.sent_offset - slave.sent_offset % segment + segment if blank else slave.sent_offset + len(data)
            )
        await reports  # raises what ended the reader (the slave went away or went quiet)

    def in_sync_slaves(self) -> list[int]:
        """Broker ids of the connected slaves that caught up once and are within haSlaveFallbehindMax."""
        master_max = self.store.get_max_phy_offset()
        return sorted(
            s.broker_id
            for s in self.slaves
            if s.caught_up and s.broker_id >= 0 and master_max - s.acked_offset <= self.config.fallbehind_max
        )

    async def drop_slaves(self) -> None:
        """Stepping down (or shutting down): end every replication stream (their slaves reconnect to the new master)
        and answer every put still waiting for a slave: not replicated."""
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for _, _, fut in self._waiters:
            if not fut.done():
                fut.set_result(False)
        self._waiters = []

    # ------------------------------------------------------------------ reporting
    def runtime_info(self) -> dict[str, str]:
        master_max = self.store.get_max_phy_offset()
        info = {"haListenPort": str(self.port), "haSlaveCount": str(len(self.slaves))}
        lags = [master_max - s.acked_offset for s in self.slaves if s.acked_offset >= 0]
        info["haSlaveLagBytes"] = str(min(lags)) if lags else "-1"
        for i, s in enumerate(self.slaves):
            info[f"haSlave{i}"] = f"{s.addr} acked={s.acked_offset} lag={master_max - s.acked_offset}"
        return info

    def log_lag(self) -> None:
        master_max = self.store.get_max_phy_offset()
        for s in self.slaves:
            log.info("replication", slave=s.addr, acked_offset=s.acked_offset, lag_bytes=master_max - s.acked_offset)
        if not self.slaves:
            log.info("replication", slaves=0, master_max_offset=master_max)


def _end_offset(results: Sequence[PutMessageResult]) -> int | None:
    """Where the last stored record of ``results`` ends; None when nothing was stored."""
    if isinstance(results, PutResults):
        if results.status is not PutMessageStatus.PUT_OK or not len(results):
            return None
        return max(o + s for o, s in zip(results.commitlog_offsets, results.sizes, strict=True))
    ends = [r.append_result.wrote_offset + r.append_result.wrote_bytes for r in results if r.ok and r.append_result]
    return max(ends) if ends else None


def _with_status(results: Any, status: PutMessageStatus, reason: str) -> Any:
    if isinstance(results, PutResults):
        return results.with_status(status, reason)
    return [PutMessageResult(status, r.append_result, reason) if r.ok else r for r in results]


async def _drain(writer: asyncio.StreamWriter, reports: asyncio.Task[None]) -> None:
    """``writer.drain()``, given up when the slave's reports stop: a slave that stopped reading (frozen, or cut off
    without a reset) would otherwise keep this stream, and its stale place among the slaves, until TCP gives up."""
    transport = writer.transport
    if transport.get_write_buffer_size() <= transport.get_write_buffer_limits()[0]:
        # at or under the low-water mark the stream is not paused: drain returns at once (or raises for a lost
        # connection), so a caught-up slave's small frames pay no task and no wait per frame
        await writer.drain()
        return
    drain = asyncio.ensure_future(writer.drain())
    try:
        await asyncio.wait((drain, reports), return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not drain.done():
            drain.cancel()
    if not drain.done() or drain.cancelled():
        await reports  # the reports ended first: raises why (the slave went quiet or away)
    drain.result()
