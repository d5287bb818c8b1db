"""A stand-in broker process for tests: keeps a ``BrokerRegistrar`` running until killed.

Usage: python -m tests.namesrv.registrar_proc NAMESRV_ADDRS BROKER_NAME BROKER_ADDR TOPIC [INTERVAL_S]
"""

from __future__ import annotations

import asyncio
import sys

from broker.registration import BrokerRegistrar
from orbitmq.route import TopicConfig


async def run(namesrv: str, name: str, addr: str, topic: str, interval: float) -> None:
    registrar = BrokerRegistrar(
        namesrv, "DefaultCluster", name, 0, addr, lambda: [TopicConfig(topic)], interval_s=interval
    )
    await registrar.start()
    print("registered", registrar.healthy_namesrvs, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    interval = float(sys.argv[5]) if len(sys.argv) > 5 else 30.0
    asyncio.run(run(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], interval))
