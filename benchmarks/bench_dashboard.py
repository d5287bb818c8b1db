"""Dashboard render time with 1,000 topics and 1,000 consumer groups: GET /topics and /groups (after login) against a
real name server, broker and ``mqdashboard``, median of several loads (goal: 500 ms or less).

``python -m benchmarks.run_all dashboard`` (``--quick``: 100 of each).
"""

from __future__ import annotations

import http.cookiejar
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import oms
from benchmarks.bench_e2e import ROOT, Broker, _free_port

GOAL_MS = 500.0


def _wait_port(port: int, timeout: float) -> None:
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"port {port} not open after {timeout}s")


def run(quick: bool = False) -> dict[str, Any]:
    n = 100 if quick else 1000
    loads = 3 if quick else 7
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as d:
        tmp = Path(d)
        ns_port = _free_port()
        ns = subprocess.Popen(
            [sys.executable, "-m", "namesrv.cli", "-p", str(ns_port), "--host", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=ROOT,
        )
        _wait_port(ns_port, 30)
        (tmp / "b").mkdir()
        broker = Broker(tmp / "b" / "store", {"namesrvAddr": f"127.0.0.1:{ns_port}"})
        dash = None
        try:
            with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap, ap.resource_manager() as rm:
                for i in range(n):
                    rm.create_topic(f"BenchDashTopic{i:04d}", read_queue_nums=4, write_queue_nums=4)
                    rm.create_group(f"GBenchDash{i:04d}")
            time.sleep(1.0)  # the next registration carries them to the name server
            users = tmp / "users"
            users.write_text("bench:bench\n")
            port = _free_port()
            dash = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dashboard.cli",
                    "-n",
                    f"127.0.0.1:{ns_port}",
                    "--port",
                    str(port),
                    "--users",
                    str(users),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=ROOT,
            )
            _wait_port(port, 60)
            base = f"http://127.0.0.1:{port}"
            opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
            form = urllib.parse.urlencode({"username": "bench", "password": "bench", "next": "/cluster"}).encode()
            opener.open(base + "/login", form, timeout=30).read()
            times: dict[str, list[float]] = {}
            for path in ("/topics", "/groups", "/cluster"):
                samples = []
                for _ in range(loads):
                    t0 = time.perf_counter()
                    body = opener.open(base + path, timeout=60).read()
                    samples.append((time.perf_counter() - t0) * 1000)
                times[path] = samples
                if path == "/topics" and b"BenchDashTopic" not in body:
                    raise RuntimeError("the topics page does not list the topics")
        finally:
            if dash is not None:
                dash.terminate()
                dash.wait(20)
            broker.stop()
            ns.terminate()
            ns.wait(20)
    medians = {p: round(statistics.median(s), 1) for p, s in times.items()}
    return {
        "summary": {
            "topics": n,
            "groups": n,
            "topics_page_ms_p50": medians["/topics"],
            "groups_page_ms_p50": medians["/groups"],
            "cluster_page_ms_p50": medians["/cluster"],
            "goal_ms": GOAL_MS,
            "meets_goal": medians["/topics"] <= GOAL_MS and medians["/groups"] <= GOAL_MS,
        },
        "samples_ms": times,
    }
