"""A full disk is refused, not crashed on: a broker whose store sits on a small tmpfs refuses writes with a reason
naming the disk, keeps serving reads and acks, takes writes again once space is freed, and loses nothing it
acknowledged (checked across a restart). The batch that met the full disk may be stored in part (at least once)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import oms
from tests.waiting import wait_until

MiB = 1024 * 1024
TOPIC = "DiskFull"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], check=True, timeout=30)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, timeout=30)


def _stored(pc: oms.PullConsumer) -> list[bytes]:
    bodies: list[bytes] = []
    for queue in pc.queues(TOPIC):
        offset = 0
        while True:
            got = pc.pull(queue, offset, 1024)
            if got.status is not oms.PullStatus.FOUND:
                break
            bodies.extend(m.body for m in got)
            offset = got.next_offset
    return bodies


@pytest.mark.timeout(180)
def test_a_full_disk_refuses_writes_serves_reads_and_recovers(broker_factory, small_disk):
    filler = small_disk / "filler"
    filler.write_bytes(b"\xff" * (12 * MiB))  # what else lives on the disk
    options = {
        "mappedFileSizeCommitLog": str(2 * MiB),
        "diskMaxUsedSpaceRatio": "99",  # retention would delete acknowledged segments to make room: not here
        "diskSpaceWarningLevelRatio": "97",
    }
    broker = broker_factory.broker(store=small_disk / "store", options=options)
    acked: list[bytes] = []
    refused: set[bytes] = set()
    refusal = None
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(compress_msg_body_over_howmuch=0, retry_times_when_send_failed=0) as producer,
    ):
        for batch in range(40):  # 40 x 512 KiB: far more than the disk holds
            bodies = [f"{batch:03d}-{i:04d}-".encode() + b"x" * 1000 for i in range(512)]
            try:
                producer.send_batch([oms.BytesMessage(b, TOPIC) for b in bodies])
            except oms.OMSException as exc:
                refusal, refused = exc, set(bodies)  # the part that fitted the last segment may be stored
                break
            acked.extend(bodies)
        assert refusal is not None, "the disk never filled up"
        assert "disk" in str(refusal), refusal
        assert broker.process.proc.poll() is None, "the broker died on the full disk"
        with pytest.raises(oms.OMSException, match="disk"):  # refused again, cleanly
            producer.send(oms.BytesMessage(b"still full", TOPIC))
        with ap.create_pull_consumer(consumer_id="GDiskFull", consume_from_where="first") as pc:
            stored = _stored(pc)  # reads go on while writes are refused
            assert set(acked) <= set(stored) and set(stored) <= set(acked) | refused
            assert len(stored) == len(set(stored))
            pc.attach_queue(TOPIC)
            first = pc.receive(10)
            assert first is not None
            pc.ack(first)  # acks too
        filler.unlink()

        def accepted() -> bool:
            try:
                producer.send(oms.BytesMessage(b"after the cleanup", TOPIC))
            except oms.OMSException:
                return False
            return True

        wait_until(accepted, 30, "a write accepted once space was freed", interval=0.2)
    broker.restart()
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_pull_consumer(consumer_id="GDiskFullAfter") as pc,
    ):
        after = _stored(pc)
        assert sorted(after) == sorted([*stored, b"after the cleanup"])  # nothing lost across the restart
