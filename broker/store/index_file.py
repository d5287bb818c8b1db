"""IndexFile: an on-disk hash index (header, slot table, chained entries) from message keys to commitlog offsets.

``IndexService`` keeps the files, rolls to a new one when full, and answers key queries in a time range.
"""
# Two slot hashes, one per file (its name says which): RocketMQ's Java String.hashCode for files named
# ``<millis>`` (RocketMQ's layout, and what earlier OrbitMQ versions wrote), CRC32 for ``<millis>.crc32``. The Java
# hash costs ~2 us per key in Python (a third of the broker's CPU under a batched send); CRC32 is one C call.

from __future__ import annotations

import mmap
import os
import struct
import threading
import time
import zlib
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from pathlib import Path

from broker.store.message import java_string_hash

HEADER = struct.Struct(">qqqqii")  # begin ts, end ts, begin phys, end phys, used slots, index count
SLOT = struct.Struct(">i")
ENTRY = struct.Struct(">iqii")  # key hash, phys offset, time diff (s), previous entry index
HEADER_SIZE = HEADER.size  # 40


class KeyHash(Enum):
    """The slot hash of an index file, chosen by its name's suffix."""

    JAVA = ""  # RocketMQ's files
    CRC32 = ".crc32"  # what this broker writes

    @classmethod
    def of(cls, name: str) -> KeyHash | None:
        """The hash of an index file named ``name``; None for a file that is no index file."""
        stem, dot, suffix = name.partition(".")
        if not stem.isdigit():
            return None
        return next((h for h in cls if h.value == dot + suffix), None)

    def prefix(self, topic: str) -> int:
        return _prefix_hash(topic) if self is KeyHash.JAVA else _prefix_crc(topic)

    def of_key(self, prefix: int, key: str) -> int:
        if self is KeyHash.JAVA:
            return _key_hash(prefix, key)
        return zlib.crc32(key.encode(), prefix) & 0x7FFFFFFF


WRITE_KEY_HASH = KeyHash.CRC32


@lru_cache(maxsize=1024)
def _prefix_crc(topic: str) -> int:
    return zlib.crc32(f"{topic}#".encode())


@lru_cache(maxsize=1024)
def _prefix_hash(topic: str) -> int:
    return java_string_hash(f"{topic}#") & 0xFFFFFFFF


@lru_cache(maxsize=4096)
def _pow31(n: int) -> int:
    return pow(31, n, 1 << 32)


def key_hash(topic: str, key: str) -> int:
    """RocketMQ's slot hash of ``topic#key``: Java ``String.hashCode``, absolute value.

    Java's hash is a polynomial, so hash(prefix + key) = hash(prefix) * 31**len(key) + hash(key) (mod 2**32): the
    topic's part is computed once per topic, not once per message (UTF-16 length for non-ASCII keys)."""
    return _key_hash(_prefix_hash(topic), key)


def _key_hash(prefix_hash: int, key: str) -> int:
    n = len(key) if key.isascii() else len(key.encode("utf-16-le")) // 2
    h = (prefix_hash * _pow31(n) + java_string_hash(key)) & 0xFFFFFFFF
    if h & 0x80000000:
        h -= 1 << 32
    return abs(h) & 0x7FFFFFFF


@dataclass
class IndexHeader:
    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = 1  # entry 0 is never used so that slot value 0 means "empty"


class IndexFile:
    def __init__(self, path: Path, slot_num: int, index_num: int) -> None:
        key_hash_kind = KeyHash.of(path.name)
        if key_hash_kind is None:
            raise ValueError(f"{path.name!r} is not an index file name (<millis> or <millis>.crc32)")
        self.key_hash = key_hash_kind
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        self.size = HEADER_SIZE + slot_num * SLOT.size + index_num * ENTRY.size
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size != self.size:
            os.ftruncate(self.fd, self.size)
        self.mm = mmap.mmap(self.fd, self.size)
        fields = HEADER.unpack_from(self.mm, 0)
        self.header = IndexHeader(*fields) if fields[5] > 0 else IndexHeader()

    def is_full(self) -> bool:
        return self.header.index_count >= self.index_num

    def _slot_pos(self, h: int) -> int:
        return HEADER_SIZE + (h % self.slot_num) * SLOT.size

    def _entry_pos(self, idx: int) -> int:
        return HEADER_SIZE + self.slot_num * SLOT.size + idx * ENTRY.size

    def put(self, topic: str, key: str, phys_offset: int, store_timestamp: int) -> bool:
        if self.is_full():
            return False
        hdr = self.header
        h = self._hash(topic, key)
        slot_pos = self._slot_pos(h)
        (prev,) = SLOT.unpack_from(self.mm, slot_pos)
        if prev <= 0 or prev >= hdr.index_count:
            prev = 0
        if hdr.index_count == 1:
            hdr.begin_timestamp = store_timestamp
            hdr.begin_phy_offset = phys_offset
        diff = max(0, (store_timestamp - hdr.begin_timestamp) // 1000)
        idx = hdr.index_count
        ENTRY.pack_into(self.mm, self._entry_pos(idx), h, phys_offset, diff, prev)
        SLOT.pack_into(self.mm, slot_pos, idx)
        if prev == 0:
            hdr.hash_slot_count += 1
        hdr.index_count += 1
        hdr.end_phy_offset = phys_offset
        hdr.end_timestamp = store_timestamp
        self._write_header()
        return True

    def put_keys(self, topic: str, keys: list[str], offsets: list[int], store_timestamp: int, start: int) -> int:
        """``put`` each of one topic's ``keys[start:]`` (commitlog offsets ``offsets``, all stored at
        ``store_timestamp``: a put's keys) until the file is full; returns the index of the first key not put.

        The topic's hash prefix and the time field are computed once, and the header is written once, after the
        entries: a slot pointing past the header's count is ignored by readers, so a crash in between loses
        nothing."""
        hdr = self.header
        mm = self.mm
        slot_num = self.slot_num
        idx, used = hdr.index_count, hdr.hash_slot_count
        stop = min(len(keys), start + max(0, self.index_num - idx))
        if stop <= start:
            return start
        if idx == 1:
            hdr.begin_timestamp, hdr.begin_phy_offset = store_timestamp, offsets[start]
        diff = max(0, (store_timestamp - hdr.begin_timestamp) // 1000)
        kind = self.key_hash
        prefix = kind.prefix(topic)
        crc = kind is KeyHash.CRC32
        crc32 = zlib.crc32
        unpack_slot, pack_slot, pack_entry = SLOT.unpack_from, SLOT.pack_into, ENTRY.pack_into
        slot_size, entry_size = SLOT.size, ENTRY.size
        entry_pos = HEADER_SIZE + slot_num * slot_size + idx * entry_size
        for i in range(start, stop):
            key = keys[i]
            h = crc32(key.encode(), prefix) & 0x7FFFFFFF if crc else _key_hash(prefix, key)
            slot_pos = HEADER_SIZE + (h % slot_num) * slot_size
            (prev,) = unpack_slot(mm, slot_pos)
            if prev <= 0 or prev >= idx:  # entry idx is not written yet: a slot naming it is a crash leftover
                prev = 0
                used += 1
            pack_entry(mm, entry_pos, h, offsets[i], diff, prev)
            pack_slot(mm, slot_pos, idx)
            idx += 1
            entry_pos += entry_size
        hdr.index_count, hdr.hash_slot_count = idx, used
        hdr.end_phy_offset, hdr.end_timestamp = offsets[stop - 1], store_timestamp
        self._write_header()
        return stop

    def _write_header(self) -> None:
        h = self.header
        HEADER.pack_into(
            self.mm,
            0,
            h.begin_timestamp,
            h.end_timestamp,
            h.begin_phy_offset,
            h.end_phy_offset,
            h.hash_slot_count,
            h.index_count,
        )

    def overlaps(self, begin: int, end: int) -> bool:
        h = self.header
        return h.index_count > 1 and h.begin_timestamp <= end and h.end_timestamp >= begin

    def select(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Commitlog offsets of entries whose key hash matches and whose time lies in [begin, end] (ms)."""
        h = self._hash(topic, key)
        (idx,) = SLOT.unpack_from(self.mm, self._slot_pos(h))
        found: list[int] = []
        seen = 0
        while 0 < idx < self.header.index_count and len(found) < max_num and seen < self.index_num:
            seen += 1
            eh, phys, diff, prev = ENTRY.unpack_from(self.mm, self._entry_pos(idx))
            ts = self.header.begin_timestamp + diff * 1000
            # time diffs are whole seconds: widen the window by one second on each side, callers re-check
            if eh == h and begin - 1000 <= ts <= end + 1000:
                found.append(phys)
            if prev <= 0 or prev >= idx:
                break
            idx = prev
        return found

    def _hash(self, topic: str, key: str) -> int:
        return self.key_hash.of_key(self.key_hash.prefix(topic), key)

    def flush(self) -> None:
        self.mm.flush()

    def close(self) -> None:
        self.mm.close()
        os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class IndexService:
    """All index files of the store, oldest first; one writer (the dispatch thread), many readers."""

    def __init__(self, directory: Path, slot_num: int, index_num: int) -> None:
        self.dir = directory
        self.slot_num = slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self.lock = threading.Lock()

    def load(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        # oldest first by creation time (the name's digits), whichever hash each file uses
        found = [p for p in self.dir.iterdir() if KeyHash.of(p.name) is not None]
        for p in sorted(found, key=lambda p: int(p.name.partition(".")[0])):
            self.files.append(IndexFile(p, self.slot_num, self.index_num))

    @property
    def max_phy_offset(self) -> int:
        """End of what is indexed (the last indexed record's offset), -1 when empty."""
        for f in reversed(self.files):
            if f.header.index_count > 1:
                return f.header.end_phy_offset
        return -1

    def _writable(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        # a RocketMQ-hash file left by an upgrade is kept for queries; new keys go to a file of today's hash
        if last is None or last.is_full() or last.key_hash is not WRITE_KEY_HASH:
            millis = int(time.time() * 1000)
            if self.files:  # names must sort after the previous file's even if the clock stepped back
                millis = max(millis, int(self.files[-1].path.name.partition(".")[0]) + 1)
            while any((self.dir / f"{millis}{h.value}").exists() for h in KeyHash):
                millis += 1
            name = f"{millis}{WRITE_KEY_HASH.value}"
            if self.files:
                self.files[-1].flush()
            self.files.append(IndexFile(self.dir / name, self.slot_num, self.index_num))
        return self.files[-1]

    def build_index(self, topic: str, keys: tuple[str, ...], unique_key: str | None, phys: int, ts: int) -> None:
        with self.lock:
            if unique_key:
                self._put(topic, unique_key, phys, ts)
            for key in keys:
                self._put(topic, key, phys, ts)

    def build_keys(self, topic: str, keys: list[str], offsets: list[int], ts: int) -> None:
        """Index ``keys[i]`` of ``topic`` at commitlog offset ``offsets[i]``, all stored at ``ts``, in order."""
        with self.lock:
            i = 0
            while i < len(keys):
                i = self._writable().put_keys(topic, keys, offsets, ts, i)

    def _put(self, topic: str, key: str, phys: int, ts: int) -> None:
        f = self._writable()
        if not f.put(topic, key, phys, ts):
            f = self._writable()
            f.put(topic, key, phys, ts)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> list[int]:
        with self.lock:
            result: list[int] = []
            for f in reversed(self.files):
                if len(result) >= max_num:
                    break
                if f.overlaps(begin - 1000, end + 1000):
                    result.extend(f.select(topic, key, max_num - len(result), begin, end))
            return result

    def truncate_from_phys(self, phys: int) -> None:
        """Crash recovery: drop whole files that index anything at or beyond ``phys`` (rebuilt by re-dispatch)."""
        with self.lock:
            while self.files and self.files[-1].header.end_phy_offset >= phys and self.files[-1].header.index_count > 1:
                if self.files[-1].header.begin_phy_offset < phys:
                    # The file mixes good and lost entries: keep it; stale offsets fail the key re-check.
                    break
                self.files.pop().destroy()

    def delete_expired(self, min_commitlog_offset: int) -> None:
        with self.lock:
            while len(self.files) > 1 and self.files[0].header.end_phy_offset < min_commitlog_offset:
                self.files.pop(0).destroy()

    def flush(self) -> None:
        with self.lock:
            for f in self.files[-2:]:
                f.flush()

    def shutdown(self) -> None:
        with self.lock:
            for f in self.files:
                f.flush()
                f.close()
            self.files = []
