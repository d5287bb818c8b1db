"""Helpers for replication tests: a master/slave broker group, CommitLog comparison, send and read-all helpers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rocketmq.grpc_protocol import definition_pb2

from tests.broker.v2client import message, raw_client
from tests.conftest import BrokerFactory, BrokerHandle, NamesrvHandle
from tests.procs import free_port
from tests.waiting import wait_until

OK = definition_pb2.Code.OK
# Small segments so a test crosses several (blank markers, new files); short HA intervals.
HA_OPTIONS = {
    "mappedFileSizeCommitLog": str(256 * 1024),
    "haSendHeartbeatInterval": "300",
    "haHousekeepingInterval": "3000",
    "slaveSyncIntervalMs": "300",
    "syncFlushTimeout": "3000",
}


@dataclass
class BrokerGroup:
    master: BrokerHandle
    slave: BrokerHandle


def start_group(
    factory: BrokerFactory,
    namesrv: NamesrvHandle | None,
    name: str,
    role: str = "SYNC_MASTER",
    options: dict[str, str] | None = None,
) -> BrokerGroup:
    """A master and one slave (brokerId 1); without a name server the slave is given ``haMasterAddress``."""
    ha_port = free_port()
    opts = {**HA_OPTIONS, **(options or {})}
    master = factory.broker(namesrv, name=name, options={**opts, "brokerRole": role, "haListenPort": str(ha_port)})
    slave_opts = {**opts, "brokerRole": "SLAVE", "brokerId": "1", "brokerName": name}
    if namesrv is None:
        slave_opts["haMasterAddress"] = f"127.0.0.1:{ha_port}"
    slave = factory.broker(namesrv, name=f"{name}-slave", options=slave_opts)
    wait_until(lambda: "slave connected" in master.log(), timeout=30, what="the slave to connect to the master")
    return BrokerGroup(master, slave)


def commitlog_bytes(store: Path) -> bytes:
    """Every CommitLog segment of ``store`` end to end, with its name (segments are pre-sized: compare whole files)."""
    parts = []
    for path in sorted((store / "commitlog").iterdir()):
        parts.append(path.name.encode() + b"\n" + path.read_bytes())
    return b"".join(parts)


def commitlog_end(store: Path) -> int:
    """Where the written part of the CommitLog ends: the last non-zero byte of the last non-empty segment."""
    for path in sorted((store / "commitlog").iterdir(), reverse=True):
        data = path.read_bytes().rstrip(b"\0")
        if data:
            return int(path.name) + len(data)
    return 0


def send_batch(addr: str, topic: str, bodies: list[bytes]) -> tuple[int, list[str], str]:
    """One SendMessage with ``bodies``; (status code, message ids if OK, status message)."""
    with raw_client(addr) as c:
        resp = c.send(*(message(topic, b) for b in bodies))
    ids = [e.message_id for e in resp.entries] if resp.status.code == OK else []
    return resp.status.code, ids, resp.status.message


def read_all(addr: str, topic: str, queues: int = 4) -> dict[str, bytes]:
    """Every message of ``topic`` on the broker at ``addr``: message id -> body."""
    found: dict[str, bytes] = {}
    with raw_client(addr) as c:
        for qid in range(queues):
            offset = 0
            while True:
                r = c.pull("ha-reader", topic, qid, offset, batch=500)
                if not r.messages:
                    break
                for m in r.messages:
                    found[m.system_properties.message_id] = m.body
                offset = r.next_offset if r.next_offset is not None else offset + len(r.messages)
    return found
