"""Whether the store may take writes: refused (with the reason naming the disk) while the disk is fuller than
``diskSpaceWarningLevelRatio`` or a segment could not be made, accepted again once a check finds room.

Reads and acks never depend on it: only appends do.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger("broker.store")


class DiskGuard:
    def __init__(
        self,
        path: Path,
        warning_ratio: int,
        min_free_bytes: int,
        usage: Callable[[Path], Any] = shutil.disk_usage,
    ) -> None:
        self.path = path
        self.warning_ratio = warning_ratio  # percent
        # room kept for what appends create besides CommitLog segments (consume queue and index files)
        self.min_free_bytes = min_free_bytes
        self._usage = usage
        self._lock = threading.Lock()
        self.reason: str | None = None  # why writes are refused now; None: they are taken

    def refuse(self, reason: str) -> None:
        """A write failed for lack of room: refuse writes until a check finds room again."""
        with self._lock:
            changed = self.reason is None
            self.reason = reason
        if changed:
            log.error("store refuses writes", extra={"reason": reason})

    def check(self) -> str | None:
        """Measure the disk now; returns (and keeps) the reason writes are refused, None when they are taken."""
        self.path.mkdir(parents=True, exist_ok=True)
        u = self._usage(self.path)
        used = u.used * 100 / u.total if u.total else 0.0
        reason = None
        if used >= self.warning_ratio:
            reason = (
                f"disk full: the disk of {self.path} is {used:.0f}% used, writes stop at "
                f"diskSpaceWarningLevelRatio={self.warning_ratio}%"
            )
        elif u.free < self.min_free_bytes:
            reason = f"disk full: {u.free} bytes free on the disk of {self.path}, {self.min_free_bytes} are kept"
        with self._lock:
            was, self.reason = self.reason, reason
        if reason != was:
            if reason is None:
                log.warning("store takes writes again", extra={"path": str(self.path)})
            else:
                log.error("store refuses writes", extra={"reason": reason})
        return reason
