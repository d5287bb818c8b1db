"""System topic names, the delay ladder and the operation timeout are defined once (``orbitmq``) and read by the
rest: the helpers' behaviour, and a scan of the source for a second definition spelled as a literal."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from orbitmq import topics
from orbitmq.delay import DEFAULT_DELAY_LEVELS_MS, DEFAULT_MESSAGE_DELAY_LEVEL, delay_ms, parse_delay_levels
from orbitmq.v2.settings import SettingsPolicy, consumer_backoff

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("orbitmq", "broker", "namesrv", "oms", "plugins", "transports", "spark_connector")
# Spelled as a literal only in orbitmq/topics.py; elsewhere a constant or helper from there.
SYSTEM_NAMES = (
    topics.RETRY_GROUP_TOPIC_PREFIX,
    topics.DLQ_GROUP_TOPIC_PREFIX,
    topics.AUTO_CREATE_TOPIC_KEY_TOPIC,
    topics.SCHEDULE_TOPIC,
    topics.TRANS_HALF_TOPIC,
    topics.TRANS_OP_HALF_TOPIC,
)


def test_group_topics_are_built_and_recognised() -> None:
    assert topics.retry_topic("G1") == "%RETRY%G1" and topics.dlq_topic("G1") == "%DLQ%G1"
    assert topics.is_retry_topic("%RETRY%G1") and not topics.is_retry_topic("%DLQ%G1")
    assert topics.is_dlq_topic("%DLQ%G1") and not topics.is_dlq_topic("Orders")
    assert topics.is_group_topic("%DLQ%G1") and topics.is_group_topic("%RETRY%G1") and not topics.is_group_topic("G")
    assert topics.group_of_topic("%RETRY%G1") == "G1" and topics.group_of_topic("%DLQ%G2") == "G2"
    assert topics.group_of_topic("%RETRY%") is None and topics.group_of_topic("Orders") is None
    assert topics.is_system_topic("TBW102") and topics.is_system_topic("rmq_sys_anything")
    assert topics.is_system_group("CID_RMQ_SYS_X") and not topics.is_system_group("GOrders")


def test_the_delay_ladder_has_one_definition() -> None:
    assert parse_delay_levels(DEFAULT_MESSAGE_DELAY_LEVEL) == DEFAULT_DELAY_LEVELS_MS
    assert DEFAULT_DELAY_LEVELS_MS[:4] == (1000, 5000, 10_000, 30_000) and DEFAULT_DELAY_LEVELS_MS[-1] == 7_200_000
    assert delay_ms(3) == 10_000 and delay_ms(99) == 7_200_000, "above the ladder means its last level"
    assert delay_ms(2, (100, 200, 300)) == 200
    # v2 Settings announce the same ladder as the consumer backoff, in whole seconds (what the clients honour)
    backoff = consumer_backoff(SettingsPolicy(), "G")
    assert [d.seconds for d in backoff.customized_backoff.next] == [ms // 1000 for ms in DEFAULT_DELAY_LEVELS_MS]
    assert all(d.nanos == 0 for d in backoff.customized_backoff.next)


def _literals(path: Path) -> list[tuple[int, str]]:
    """String constants of a module but its docstrings (module, class and function)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_system_names_are_spelled_only_in_orbitmq_topics(package: str) -> None:
    home = ROOT / "orbitmq" / "topics.py"
    found = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != home and "_pb2" not in path.name
        for line, value in _literals(path)
        if value.startswith(SYSTEM_NAMES)
    ]
    assert not found, "use orbitmq.topics instead of spelling these again:\n" + "\n".join(found)
