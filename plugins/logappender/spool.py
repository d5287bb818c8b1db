"""The disk spool: batches the broker could not take, one file per batch, replayed oldest first (also by the next
process that uses the same directory), bounded by total bytes and by age.

File names are ``<time_ns>-<pid>-<n>-<records>.spool`` so their order is the spool order and their record count
is known without reading them. A replaying process claims a file by renaming it (atomic), so two processes
sharing the directory never send one batch twice; claims of dead processes are released on open.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from plugins.logappender.record import OutMessage

SUFFIX = ".spool"
CLAIM = ".claim"


@dataclass(frozen=True)
class SpoolFile:
    path: Path
    created_ns: int
    records: int
    size: int


class SpoolError(Exception):
    """A spool file could not be written or read (disk full, permissions, a corrupt file)."""


def _parse(path: Path) -> tuple[int, int] | None:
    parts = path.name[: -len(SUFFIX)].split("-")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[3])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DiskSpool:
    def __init__(self, directory: Path, max_bytes: int, max_age_s: float) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self._counter = itertools.count()
        directory.mkdir(parents=True, exist_ok=True)
        self.release_stale_claims()

    def release_stale_claims(self) -> None:
        """Claims left by processes that died mid-replay go back into the spool."""
        for path in self.directory.glob(f"*{SUFFIX}.*{CLAIM}"):
            owner = path.name.rsplit(".", 2)[-2]
            if owner.isdigit() and not _pid_alive(int(owner)):
                with contextlib.suppress(FileNotFoundError):
                    os.replace(path, path.with_name(path.name.split(SUFFIX)[0] + SUFFIX))

    def files(self) -> list[SpoolFile]:
        """Unclaimed spool files, oldest first."""
        found = []
        for path in self.directory.glob(f"*{SUFFIX}"):
            parsed = _parse(path)
            if parsed is None:
                continue
            try:
                size = path.stat().st_size
            except FileNotFoundError:  # another process claimed it meanwhile
                continue
            found.append(SpoolFile(path, parsed[0], parsed[1], size))
        found.sort(key=lambda f: f.path.name)
        return found

    def pending_records(self) -> int:
        return sum(f.records for f in self.files())

    def write(self, messages: list[OutMessage]) -> tuple[int, int]:
        """Store one batch; returns (records written, records evicted to stay within max_bytes/max_age)."""
        records = sum(m.count for m in messages)
        data = "".join(json.dumps(m.to_json(), ensure_ascii=False) + "\n" for m in messages).encode("utf-8")
        evicted = self.expire()
        files = self.files()
        total = sum(f.size for f in files)
        while files and total + len(data) > self.max_bytes:  # the oldest give way: newer logs are worth more
            victim = files.pop(0)
            with contextlib.suppress(FileNotFoundError):
                victim.path.unlink()
                evicted += victim.records
            total -= victim.size
        if len(data) > self.max_bytes:
            return 0, evicted + records
        name = f"{time.time_ns():020d}-{os.getpid()}-{next(self._counter)}-{records}{SUFFIX}"
        tmp = self.directory / f".{name}.tmp"
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.directory / name)  # readers see whole files only
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise SpoolError(f"cannot write spool file in {self.directory}: {exc}") from exc
        return records, evicted

    def expire(self) -> int:
        """Delete files older than max_age; returns the records they held."""
        limit = time.time_ns() - int(self.max_age_s * 1e9)
        dropped = 0
        for f in self.files():
            if f.created_ns >= limit:
                break
            with contextlib.suppress(FileNotFoundError):
                f.path.unlink()
                dropped += f.records
        return dropped

    def claim_oldest(self) -> tuple[Path, list[OutMessage], int] | None:
        """The oldest batch, claimed by this process (``release`` or ``done`` it), or None if the spool is empty."""
        for f in self.files():
            claimed = f.path.with_name(f"{f.path.name}.{os.getpid()}{CLAIM}")
            try:
                os.replace(f.path, claimed)
            except FileNotFoundError:
                continue  # another process took it
            try:
                lines = claimed.read_text("utf-8").splitlines()
                messages = [OutMessage.from_json(json.loads(line)) for line in lines if line.strip()]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                bad = claimed.with_name(claimed.name + ".corrupt")
                with contextlib.suppress(OSError):
                    os.replace(claimed, bad)
                raise SpoolError(f"spool file {f.path.name} is unreadable ({exc}); kept as {bad.name}") from exc
            return claimed, messages, f.records
        return None

    @staticmethod
    def release(claimed: Path) -> None:
        """Give a claimed batch back (the send failed): it stays first in line."""
        with contextlib.suppress(FileNotFoundError):
            os.replace(claimed, claimed.with_name(claimed.name.split(SUFFIX)[0] + SUFFIX))

    @staticmethod
    def done(claimed: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            claimed.unlink()
