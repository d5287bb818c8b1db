"""SQL92 filtered consumption at 1% selectivity through the store, with and without the Bloom pre-check.

Same store, same messages, same run: the ratio is what the ConsumeQueue extension buys.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import median
from broker.builtin_plugins import builtin_plugins
from broker.config import BrokerConfig
from broker.consumer_filter_manager import ConsumerFilterManager
from broker.plugins import BrokerPlugins
from broker.store.config import MessageStoreConfig
from broker.store.message import MessageExtBrokerInner
from broker.store.message_store import DefaultMessageStore

TOPIC = "FilterBench"


def _put_all(store: DefaultMessageStore, n: int, batch: int = 256) -> float:
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        msgs = [
            MessageExtBrokerInner(TOPIC, b"x" * 100, 0, {"n": str(i % 100), "region": "eu"})
            for i in range(start, min(n, start + batch))
        ]
        store.put_messages(msgs)
    return time.perf_counter() - t0


def _drain(store: DefaultMessageStore, msg_filter: Any) -> tuple[int, float]:
    t0 = time.perf_counter()
    offset, got = 0, 0
    end = store.get_max_offset_in_queue(TOPIC, 0)
    while offset < end:
        r = store.get_message("bench", TOPIC, 0, offset, 32, msg_filter)
        got += len(r.messages)
        offset = r.next_begin_offset
    return got, time.perf_counter() - t0


def run(quick: bool = False) -> dict[str, Any]:
    n = 20_000 if quick else 200_000
    with tempfile.TemporaryDirectory(prefix="orbitmq-filter-bench-") as tmp:
        root = Path(tmp)
        cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=256 << 20)
        store = DefaultMessageStore(cfg, ("127.0.0.1", 8081))
        store.load()
        store.start()
        try:
            plugins = BrokerPlugins.create(builtin_plugins(BrokerConfig(), root), load_entry_points=False)
            manager = ConsumerFilterManager(root / "config.json", store, plugins.compile_filter, plugins.filter_bits)
            compiled = plugins.compile_filter("SQL92", "n = 7 AND region = 'eu'")
            with_bloom = manager.filter_for("bench", TOPIC, compiled)
            # Puts with one registered SQL92 group pay for the evaluation at dispatch.
            put_s = _put_all(store, n)
            rounds: dict[str, list[float]] = {"bloom": [], "evaluate": []}
            matched = {}
            for _ in range(3):
                for name, f in (("bloom", with_bloom), ("evaluate", compiled)):
                    got, secs = _drain(store, f)
                    matched[name] = got
                    rounds[name].append(secs)
        finally:
            store.shutdown()
    bloom_s, eval_s = median(rounds["bloom"]), median(rounds["evaluate"])
    return {
        "quick": quick,
        "messages": n,
        "selectivity": 0.01,
        "put_with_one_sql92_group_per_s": n / put_s,
        "scan_with_bloom_entries_per_s": n / bloom_s,
        "scan_evaluating_entries_per_s": n / eval_s,
        "matched": matched,
        "summary": {
            "bloom_speedup": eval_s / bloom_s,
            "scan_with_bloom_entries_per_s": round(n / bloom_s),
            "scan_evaluating_entries_per_s": round(n / eval_s),
        },
    }
