"""Re-reads ``plain_acl.yml`` when it changes: a cheap ``stat`` on access, at most once per check interval.

A file that no longer loads keeps the last good configuration in force and logs why, once per change of the file.
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

# (inode, mtime ns, ctime ns, size): the inode catches an editor's rename-into-place, ctime a same-size rewrite
# within one mtime tick on filesystems with coarse timestamps.
_Stamp = tuple[int, int, int, int]
_MISSING: _Stamp = (-1, -1, -1, -1)


class AclFileWatcher:
    """Holds the current ``AclConfig`` of one file; ``current()`` reloads it when the file's stamp changed.

    Checking on access needs no thread: the broker asks on every request, so a change is seen within
    ``check_interval_s`` of the next request. The reload runs in the caller (a small file, once per change).
    """

    def __init__(self, path: Path, check_interval_s: float = CHECK_INTERVAL_S) -> None:
        self.path = path
        self.check_interval_s = check_interval_s
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._config = AclConfig.load(path)  # the first load must succeed: never start with a bad file
        self._next_check = time.monotonic() + check_interval_s
        self._closed = False
        self.reloads = 0  # successful reloads since start, for tests and diagnostics
        self.failed_reloads = 0

    def _stat(self) -> _Stamp:
        try:
            st = os.stat(self.path)
        except OSError:
            return _MISSING
        return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)

    def current(self) -> AclConfig:
        """The configuration in force, after a reload if the interval passed and the file changed."""
        if self._closed or time.monotonic() < self._next_check:
            return self._config
        with self._lock:
            now = time.monotonic()
            if now >= self._next_check:  # another thread may have checked while this one waited
                self._next_check = now + self.check_interval_s
                self._reload_if_changed()
        return self._config

    def _reload_if_changed(self) -> None:
        stamp = self._stat()
        if stamp == self._stamp:
            return
        # Remember the stamp even when the load fails, so a broken file is reported once, not on every check.
        self._stamp = stamp
        try:
            config = AclConfig.load(self.path)
        except AclConfigError as exc:
            self.failed_reloads += 1
            log.error("ACL file not reloaded, the previous configuration stays in force: %s", exc)
            return
        self._config = config
        self.reloads += 1
        log.info("ACL file reloaded: %s (%d accounts)", self.path, len(config.accounts))

    def close(self) -> None:
        """Stop looking at the file; ``current()`` keeps answering with the last configuration."""
        self._closed = True
