"""An application with its own top-level ``common`` package (a Django app named ``common`` is ordinary) imports and
uses the ``oms`` client: our shared code lives under ``orbitmq`` so the application's package never shadows it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import BrokerHandle

APP_SCRIPT = """
import common  # the application's own package, first on sys.path as the script's directory
import oms

assert common.OWNER == "application", common.__file__
with oms.get_messaging_access_point("oms:rocketmq://{addr}/") as ap:
    with ap.create_producer(operation_timeout=10_000) as producer:
        producer.send(oms.BytesMessage(b"from-an-app-with-common", "ShadowTopic"))
    with ap.create_pull_consumer(consumer_id="GShadow", consume_from_where="first") as consumer:
        consumer.attach_queue("ShadowTopic")
        msg = consumer.receive(10)
        assert msg is not None and msg.body == b"from-an-app-with-common", msg
        consumer.ack(msg)
import sys
assert "orbitmq" in sys.modules and sys.modules["common"].OWNER == "application"
print("OK")
"""


@pytest.mark.integration
@pytest.mark.timeout(60)
def test_oms_works_inside_an_application_with_its_own_common_package(tmp_path: Path, broker: BrokerHandle) -> None:
    app = tmp_path / "app"
    (app / "common").mkdir(parents=True)
    (app / "common" / "__init__.py").write_text('OWNER = "application"\n')
    script = app / "main.py"
    script.write_text(textwrap.dedent(APP_SCRIPT).format(addr=broker.addr))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=app, capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stdout + done.stderr
