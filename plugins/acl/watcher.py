"""Re-reads ``plain_acl.yml`` when it changes: a cheap stat on access, at most once per check interval.

A file that no longer parses keeps the last good configuration in force and logs why, once per change.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from plugins.acl.config import AclConfig, AclConfigError

log = logging.getLogger(__name__)
CHECK_INTERVAL_S = 1.0


class AclFileWatcher:
    def __init__(self, path: Path, check_interval_s: float = CHECK_INTERVAL_S) -> None:
        self.path = path
        self.check_interval_s = check_interval_s
        self._lock = threading.Lock()
        self._config = AclConfig.load(path)  # the first load must succeed: a broker never starts with a bad file
        self._stamp = self._stat()
        self._next_check = time.monotonic() + check_interval_s

    def _stat(self) -> tuple[int, int]:
        try:
            st = os.stat(self.path)
        except OSError:
            return (-1, -1)
        return (st.st_mtime_ns, st.st_size)

    def current(self) -> AclConfig:
        now = time.monotonic()
        if now < self._next_check:
            return self._config
        with self._lock:
            self._next_check = now + self.check_interval_s
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._config = AclConfig.load(self.path)
                    log.info("ACL file reloaded: %s (%d accounts)", self.path, len(self._config.accounts))
                except AclConfigError as exc:
                    log.error("ACL file not reloaded, keeping the previous one: %s", exc)
        return self._config
