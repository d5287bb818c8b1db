"""Send the example project's tasks and print what comes back.

cd examples/celery_project
celery -A tasks worker -l INFO          # in another terminal (or pass --start-worker)
python run_demo.py [--addr 127.0.0.1:8081] [--start-worker]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--addr", default="127.0.0.1:8081", help="OrbitMQ name server or broker (host:port)")
    parser.add_argument("--start-worker", action="store_true", help="run a worker for the demo, stopped at the end")
    args = parser.parse_args()
    os.environ["CELERY_BROKER_URL"] = f"rocketmq://{args.addr}"
    sys.path.insert(0, str(HERE))
    worker = None
    if args.start_worker:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tasks", "worker", "-c", "2", "-l", "WARNING", "-n", "demo@%h"],
            cwd=HERE,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent.parent)])},
        )
    try:
        import tasks
        from celery import chain, group

        print("add(2, 3) =", tasks.add.delay(2, 3).get(timeout=60))
        print("chain((1+2)+10) =", chain(tasks.add.s(1, 2), tasks.add.s(10))().get(timeout=30))
        print("group =", group(tasks.add.s(i, i) for i in range(4))().get(timeout=30))
        sent = time.time()
        started = tasks.now.apply_async(countdown=2).get(timeout=30)
        print(f"countdown=2 started after {started - sent:.2f}s (held on the broker as a timer message)")
        print("flaky succeeded after", tasks.flaky.delay(1).get(timeout=30), "retry")
        return 0
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            worker.wait(60)


if __name__ == "__main__":
    sys.exit(main())
