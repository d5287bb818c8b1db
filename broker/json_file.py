"""Atomic JSON files for broker metadata (topics, groups, consumer offsets).

Write to a temp file, fsync, rename, fsync the directory: a crash leaves the old or the new file, never half of one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_json_atomic(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    payload = json.dumps(data, indent=2, sort_keys=True).encode("utf-8")
    with open(tmp, "wb") as f:
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_json(path: Path) -> Any | None:
    """The file's JSON, or None when it does not exist (a fresh store)."""
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8"))
