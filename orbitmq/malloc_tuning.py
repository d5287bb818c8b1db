"""glibc malloc settings for a long-running server: keep the heap memory a request freed for the next request.

By default glibc gives the top of the heap back to the system once a free leaves more than about twice the
largest recent allocation there, and the next request of that size faults every page back in (a SendBatch of a
few megabytes freed and faulted in again, request after request).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("orbitmq.malloc")

# mallopt(3) parameters
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# glibc refuses larger mmap thresholds (HEAP_MAX_SIZE / 2 on 64-bit); blocks above it are mapped and unmapped anyway
MAX_MMAP_THRESHOLD = 32 * 1024 * 1024
MAX_KEEP_FREED_MB = 2047  # mallopt takes an int of bytes


def keep_freed_memory(keep_bytes: int) -> bool:
    """Keep up to ``keep_bytes`` of freed heap instead of trimming it, and serve blocks up to 32 MiB from the heap
    rather than from maps of their own (setting one threshold turns off glibc's adjustment of the other). False
    when this is not glibc (musl, macOS): nothing changes there."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError) as exc:
        log.info("malloc settings left as they are: %s", exc)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    mmap_threshold = min(keep_bytes, MAX_MMAP_THRESHOLD)
    return bool(mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(mallopt(M_TRIM_THRESHOLD, keep_bytes))
