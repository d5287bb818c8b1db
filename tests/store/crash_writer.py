"""Child process for the crash test: appends with SYNC_FLUSH and reports each acknowledged append."""

from __future__ import annotations

import hashlib
import sys

from broker.store.config import FlushDiskType
from broker.store.message import MessageExtBrokerInner
from broker.store.message_store import DefaultMessageStore
from tests.store.conftest import small_config


def main() -> None:
    root, start = sys.argv[1], int(sys.argv[2])
    store = DefaultMessageStore(
        small_config(__import__("pathlib").Path(root), flushDiskType=FlushDiskType.SYNC_FLUSH), ("127.0.0.1", 1)
    )
    store.load()
    store.start()
    i = start
    while True:
        payload = hashlib.sha256(str(i).encode()).hexdigest().encode() * (1 + i % 7)
        futures = [store.put_message_async(MessageExtBrokerInner("C", payload, i % 3, {"KEYS": str(i)}))]
        r = futures[0].result()
        if r.ok and r.append_result is not None:
            sys.stdout.write(f"{i} {i % 3} {r.append_result.logics_offset}\n")
            sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    main()
