"""ConsumerFilterManager: the groups' SQL92 subscriptions per topic, their Bloom bits, and the bit dispatcher.

At dispatch every registered expression of the message's topic is evaluated and the matching groups' bits are
stored in the ConsumeQueue extension; a pull then skips entries whose bits say "no" without reading the commitlog.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from broker.hookspecs import CompiledFilter, FilterBitmap, FilterRegistration, FilterType, StoredMessage
from broker.json_file import read_json, write_json_atomic
from broker.store.message import MessageExtBrokerInner
from broker.store.message_store import DefaultMessageStore
from broker.store.results import AppendMessageResult, MessageFilter
from orbitmq.filter.bloom import BloomFilter, BloomFilterData
from orbitmq.logging import get_logger

log = get_logger("broker.filter")

CompileFn = Callable[[str, str], CompiledFilter | None]


@dataclass(frozen=True)
class BloomCheckedFilter:
    """A group's compiled filter behind its Bloom bits: a clear bit means "no match" for certain."""

    inner: CompiledFilter
    bloom: BloomFilter
    data: BloomFilterData
    since_commitlog_offset: int
    uses_cq_ext: bool = True

    @property
    def expression_type(self) -> str:
        return self.inner.expression_type

    @property
    def expression(self) -> str:
        return self.inner.expression

    @property
    def matches_all(self) -> bool:
        return False

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: FilterBitmap | None) -> bool:
        # No unit, or one written before the group registered: its bits say nothing about this group.
        if cq_ext is not None and cq_ext.commitlog_offset >= self.since_commitlog_offset:
            try:
                hit = self.bloom.is_hit(self.data, cq_ext.bitmap)
            except ValueError:  # a bitmap of another geometry says nothing: evaluate the message
                hit = True
            if not hit:
                return False
        return self.inner.is_matched_by_consume_queue(tags_code, None)

    def is_matched_by_commitlog(self, msg: StoredMessage) -> bool:
        return self.inner.is_matched_by_commitlog(msg)


class ConsumerFilterManager:
    """Registrations persist in ``config/consumerFilter.json`` (RocketMQ's file name) across restarts."""

    def __init__(
        self,
        path: Path,
        store: DefaultMessageStore,
        compile_filter: CompileFn,
        filter_bits: Callable[[MessageExtBrokerInner, list[FilterRegistration], bytearray], None],
        *,
        error_rate_percent: int = 20,
        expected_groups: int = 32,
        enabled: bool = True,
    ) -> None:
        self.path = path
        self.store = store
        self.compile = compile_filter
        self.filter_bits = filter_bits
        self.enabled = enabled
        self.bloom = BloomFilter.create(error_rate_percent, expected_groups)
        self._by_topic: dict[str, dict[str, FilterRegistration]] = {}
        self._lists: dict[str, list[FilterRegistration]] = {}  # per topic, what the dispatcher iterates
        self._wrapped: dict[tuple[str, str, str, str], BloomCheckedFilter] = {}
        self._dispatching = False
        # Registrations happen inside pulls on the event loop: the file is written (fsync) on this one thread, in
        # order, so a slow disk never stalls the loop and an older snapshot never overwrites a newer one.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="consumer-filter-persist")
        if enabled:
            store.enable_cq_ext(self.bloom.byte_length)

    # ------------------------------------------------------------------ persistence
    def load(self) -> None:
        data = read_json(self.path)
        if not data:
            return
        same_bloom = data.get("bloomM") == self.bloom.m and data.get("bloomK") == self.bloom.k
        max_offset = self.store.get_max_phy_offset()
        for item in data.get("filters", []):
            try:
                compiled = self.compile(item["expressionType"], item["expression"])
            except Exception as exc:  # an expression a plugin no longer accepts: drop it, keep the rest
                log.warning("stored filter dropped", group=item.get("group"), error=repr(exc))
                continue
            if compiled is None:
                continue
            # Bits written under another Bloom geometry mean nothing now: trust only what comes next.
            since = int(item["sinceCommitlogOffset"]) if same_bloom else max_offset
            self._add(item["group"], item["topic"], compiled, since)

    def persist(self) -> None:
        write_json_atomic(self.path, self._snapshot())

    def _persist_later(self) -> None:
        snapshot = self._snapshot()
        future = self._writer.submit(write_json_atomic, self.path, snapshot)
        future.add_done_callback(_log_persist_failure)

    def close(self) -> None:
        """Finish pending writes (broker shutdown)."""
        self._writer.shutdown(wait=True)

    def _snapshot(self) -> dict[str, object]:
        filters = [
            {
                "group": r.group,
                "topic": r.topic,
                "expressionType": r.expression_type,
                "expression": r.expression,
                "sinceCommitlogOffset": r.since_commitlog_offset,
            }
            for regs in self._by_topic.values()
            for r in regs.values()
        ]
        return {"bloomM": self.bloom.m, "bloomK": self.bloom.k, "filters": filters}

    # ------------------------------------------------------------------ registration
    def _add(self, group: str, topic: str, compiled: CompiledFilter, since: int) -> FilterRegistration:
        reg = FilterRegistration(
            group=group,
            topic=topic,
            expression_type=compiled.expression_type,
            expression=compiled.expression,
            filter=compiled,
            bloom_positions=self.bloom.generate(f"{group}#{topic}").positions,
            since_commitlog_offset=since,
        )
        regs = self._by_topic.setdefault(topic, {})
        regs[group] = reg
        self._lists[topic] = list(regs.values())
        if not self._dispatching:
            # Only once a registration exists: until then puts pay nothing for the filter machinery.
            self._dispatching = True
            self.store.add_dispatcher(self)
        return reg

    def filter_for(self, group: str, topic: str, compiled: CompiledFilter | None) -> MessageFilter | None:
        """The filter a pull of ``group`` on ``topic`` should use: SQL92 ones get the Bloom pre-check.

        The first pull with a new expression registers it; bits exist from the current end of the log on."""
        if compiled is None or not self.enabled or compiled.expression_type != FilterType.SQL92.value:
            return compiled
        key = (group, topic, compiled.expression_type, compiled.expression)
        wrapped = self._wrapped.get(key)
        if wrapped is not None:
            return wrapped
        reg = self._by_topic.get(topic, {}).get(group)
        if reg is None or reg.expression != compiled.expression or reg.expression_type != compiled.expression_type:
            # Registered before reading the end offset: every message stored at or after ``since`` is dispatched
            # with this registration present (see docs/plugins.md, "Bloom pre-check").
            self._add(group, topic, compiled, 0)
            since = self.store.get_max_phy_offset()
            reg = self._add(group, topic, compiled, since)
            self._persist_later()
            log.info("filter registered", group=group, topic=topic, expression=compiled.expression, since=since)
        wrapped = BloomCheckedFilter(
            compiled, self.bloom, BloomFilterData(reg.bloom_positions, self.bloom.m), reg.since_commitlog_offset
        )
        self._wrapped = {k: v for k, v in self._wrapped.items() if k[:2] != (group, topic)}
        self._wrapped[key] = wrapped
        return wrapped

    def registrations(self, topic: str) -> list[FilterRegistration]:
        return list(self._lists.get(topic, ()))

    # ------------------------------------------------------------------ dispatch (CommitLogDispatcherCalcBitMap)
    def dispatch(self, msg: MessageExtBrokerInner, result: AppendMessageResult) -> None:
        regs = self._lists.get(msg.topic)
        if not regs or msg.inner_tags_codes is not None:
            # An inner batch's properties are not its messages': without a bitmap each message is evaluated.
            return
        bits = bytearray(self.bloom.byte_length)
        try:
            self.filter_bits(msg, regs, bits)
        except Exception as exc:  # never fail a stored message; the pull falls back to evaluation
            log.error("filter bits failed", topic=msg.topic, error=repr(exc))
            return
        self.store.put_cq_ext(msg.topic, msg.queue_id, result.logics_offset, result.wrote_offset, bytes(bits))


def _log_persist_failure(future: Future[None]) -> None:
    exc = future.exception()
    if exc is not None:  # the registration stays in memory; the next one (or a restart's re-registration) retries
        log.error("consumerFilter.json not written", error=repr(exc))
