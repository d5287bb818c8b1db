"""The pipeline example (examples/spark/pipeline.py) end to end in the test session: events produced with oms,
windowed counts written to a topic and to Parquet, both read back and compared with what was produced."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import BrokerHandle
from tests.procs import ROOT

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.mark.timeout(300)
def test_pipeline_example_counts_every_event_in_the_topic_and_in_parquet(
    spark: Any, spark_broker: BrokerHandle, tmp_path: Path
) -> None:
    spec = importlib.util.spec_from_file_location("spark_pipeline_example", ROOT / "examples" / "spark" / "pipeline.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    result = example.run_pipeline(spark, spark_broker.addr, 600, tmp_path)
    assert sum(result["produced"].values()) == 600
    assert result["topic"] == result["produced"]
    assert result["parquet"] == result["produced"]
