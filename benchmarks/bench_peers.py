"""Peer benchmark: the e2e workload (produce then consume-with-ack of 100-byte messages) against Redis Streams,
RabbitMQ and NATS JetStream, each a Debian-packaged server started here on 127.0.0.1 with a fresh data dir.

``python -m benchmarks.bench_peers [--quick] [--n N]`` (``bench_e2e.run()`` calls :func:`run` so the peers are
measured in the same run as OrbitMQ). ``scripts/install_peers.sh`` (``make bench-peers-install``) installs the
servers and the clients; a peer whose server binary or Python client is missing is reported as "not installed".

Workload per peer, one Python client process, N messages (default 200,000, ``--quick`` 20,000):

* Redis Streams (AOF ``everysec``, RDB off): XADD in non-transactional pipelines of 100; consume with a consumer
  group, XREADGROUP COUNT 100 and one XACK per batch.
* RabbitMQ: one durable **quorum** queue (single node; a confirm means the message is in the fsynced Raft WAL,
  the closest to our produce answer and RabbitMQ's recommended durable queue type), persistent messages,
  publisher confirms with at most 1,000 unconfirmed in flight; consume with prefetch 1,000 and one basic_ack per
  message.
* NATS JetStream: a file-storage stream (R1), ``publish_async`` with at most 4,000 pending PubAcks; a durable
  pull consumer (explicit ack), ``fetch(100)`` and ``ack()`` per message.

Then the e2e latency workload, as OrbitMQ's (``bench_e2e.bench_latency``): LATENCY_RATE msg/s as a batch every
LATENCY_TICK_MS from a pacer thread, each body stamped with its scheduled time, the consumer's receive time minus
the stamp. Redis: a pipeline of XADDs per tick, XREAD BLOCK from the last id. NATS: ``publish_async`` per message,
an ordered push consumer. RabbitMQ: the quorum queue, pika's asyncio adapter, a basic_consume with manual acks.

Every phase has a timeout (a timed-out phase reports what it did and ``timed_out: true``); every server started
is stopped by its PID in a ``finally``. Each phase also reports ``other_cores``: the cores used by processes
other than this one and its servers during the phase (the machine is shared; > ~0.3 means a contaminated figure).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import (
    LATENCY_RATE,
    LATENCY_TICK_MS,
    PacedRun,
    latency_ms,
    paced_sends,
    paced_total,
    pct,
    stamped_body,
    write_result,
)

BODY_SIZE = 100
N_FULL = 200_000
N_QUICK = 20_000
PHASE_TIMEOUT_S = 180.0
BATCH = 100  # Redis pipeline / XREADGROUP COUNT, JetStream fetch size
RABBIT_WINDOW = 1_000  # unconfirmed publishes in flight
RABBIT_PREFETCH = 1_000
NATS_WINDOW = 4_000  # publish_async_max_pending
RABBIT_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")  # Debian's location; /usr/sbin's wrapper su's away
_CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Phase:
    """One measured phase: ``messages`` done in ``seconds``."""

    messages: int
    seconds: float
    timed_out: bool = False
    other_cores: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def msgs_per_s(self) -> int:
        return round(self.messages / self.seconds) if self.seconds > 0 else 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "seconds": round(self.seconds, 3),
            "msgs_per_s": self.msgs_per_s,
            "timed_out": self.timed_out,
            "other_cores": self.other_cores,
            **self.extra,
        }


@dataclass
class PeerResult:
    peer: str
    status: str  # "ok", "not installed", "skipped" or "failed"
    reason: str | None = None
    server_version: str | None = None
    client_version: str | None = None
    startup_s: float | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    produce: Phase | None = None
    consume: Phase | None = None
    latency: dict[str, Any] | None = None  # the e2e latency workload: LATENCY_RATE msg/s, a batch every tick

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["produce"] = self.produce.as_dict() if self.produce else None
        out["consume"] = self.consume.as_dict() if self.consume else None
        return out


# --- helpers ---------------------------------------------------------------------------------------------------


LATENCY_SECONDS = 5.0
LATENCY_SECONDS_QUICK = 2.0


def _latency_result(latencies: list[float], paced: PacedRun, expected: int) -> dict[str, Any]:
    return {
        "target_rate": LATENCY_RATE,
        "tick_ms": LATENCY_TICK_MS,
        "messages": len(latencies),
        "timed_out": len(latencies) < expected,
        "latency_ms_p50": round(pct(latencies, 50), 3),
        "latency_ms_p99": round(pct(latencies, 99), 3),
        "latency_ms_max": round(max(latencies), 3) if latencies else None,
        **paced.as_dict(),
    }


async def _await_count(latencies: list[float], expected: int, timeout_s: float) -> None:
    """Until ``expected`` latencies are in or ``timeout_s`` passes (the result's ``timed_out`` says which)."""
    deadline = time.monotonic() + timeout_s
    while len(latencies) < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # exited while we listed
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def _tree(root: int) -> set[int]:
    """``root`` and its descendants (RabbitMQ's wrapper script runs beam.smp and helpers below it)."""
    kids, out, todo = _children(), set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(kids.get(pid, []))
    return out


def _cpu_jiffies(pid: int) -> int:
    """utime + stime of ``pid`` plus its reaped children's."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2 :].split()
    return sum(int(x) for x in fields[11:15])


def _machine_busy_jiffies() -> int:
    with open("/proc/stat") as f:
        values = [int(x) for x in f.readline().split()[1:9]]
    return sum(values) - values[3] - values[4]  # minus idle and iowait


@contextmanager
def _cpu_watch(server_pids: Callable[[], set[int]], out: dict[str, float]) -> Iterator[None]:
    """Put into ``out["other_cores"]`` the average cores busy outside this process and the server's process tree."""

    def own_roots() -> set[int]:
        # Re-read at the end too: servers may have forked helpers during the phase.
        return _tree(os.getpid()) | server_pids()

    pids = own_roots()
    t0, busy0 = time.perf_counter(), _machine_busy_jiffies()
    own0 = {p: _cpu_jiffies(p) for p in pids}
    try:
        yield
    finally:
        elapsed = time.perf_counter() - t0
        busy = (_machine_busy_jiffies() - busy0) / _CLK_TCK
        own = sum(max(0, _cpu_jiffies(p) - own0.get(p, 0)) for p in pids | own_roots()) / _CLK_TCK
        out["other_cores"] = round(max(0.0, busy - own) / elapsed, 2) if elapsed > 0 else 0.0


def _stop_pid(proc: subprocess.Popen[bytes], grace_s: float = 20.0) -> None:
    """SIGTERM the process by PID, SIGKILL it if it has not exited after ``grace_s``."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc})"


def _which(*candidates: str) -> Path | None:
    for c in candidates:
        found = shutil.which(c) if "/" not in c else (c if os.access(c, os.X_OK) else None)
        if found:
            return Path(found)
    return None


def _missing(binary: Path | None, binary_name: str, module: str) -> str | None:
    """Why the peer cannot run (None when it can)."""
    why = []
    if binary is None:
        why.append(f"server {binary_name} not found")
    if importlib.util.find_spec(module) is None:
        why.append(f"Python client {module!r} not importable")
    return "; ".join(why) + " (make bench-peers-install)" if why else None


# --- Redis Streams ---------------------------------------------------------------------------------------------


async def _redis_latency(port: int, seconds: float) -> dict[str, Any]:
    import redis.asyncio as aredis

    producer = aredis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
    reader = aredis.Redis(host="127.0.0.1", port=port, socket_timeout=30)  # its own connection for XREAD BLOCK
    stream = "bench-latency"
    expected = paced_total(LATENCY_RATE, seconds, LATENCY_TICK_MS)
    latencies: list[float] = []

    async def consume() -> None:
        last = "0-0"
        while len(latencies) < expected:
            resp: Any = await reader.xread({stream: last}, count=256, block=1000)  # RESP2: [[stream, entries]]
            now = time.time_ns()
            for _, entries in resp or []:
                for mid, fields in entries:
                    latencies.append(latency_ms(fields[b"d"], now))
                    last = mid

    async def send(_k: int, n: int, stamp: int) -> None:
        body = stamped_body(stamp, BODY_SIZE)
        pipe = producer.pipeline(transaction=False)
        for _ in range(n):
            pipe.xadd(stream, {"d": body})
        await pipe.execute()

    reading = asyncio.create_task(consume())
    try:
        await asyncio.sleep(0.3)
        paced = await paced_sends(LATENCY_RATE, seconds, LATENCY_TICK_MS, send)
        await _await_count(latencies, expected, 10)
    finally:
        reading.cancel()
        await asyncio.gather(reading, return_exceptions=True)
        await producer.aclose()
        await reader.aclose()
    return _latency_result(latencies, paced, expected)


def bench_redis(n: int, workdir: Path, latency_s: float) -> PeerResult:
    binary = _which("redis-server", "/usr/bin/redis-server")
    settings = {
        "appendonly": "yes",
        "appendfsync": "everysec",
        "save": "off",
        "pipeline": BATCH,
        "xreadgroup_count": BATCH,
        "ack": "one XACK per batch",
    }
    result = PeerResult("redis-streams", "not installed", settings=settings)
    if (why := _missing(binary, "redis-server", "redis")) is not None:
        result.reason = why
        return result
    assert binary is not None
    import redis

    result.client_version = redis.__version__
    port = _free_port()
    data = workdir / "redis"
    data.mkdir()
    args = [
        str(binary), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data), "--save", "",
        "--appendonly", "yes", "--appendfsync", "everysec", "--daemonize", "no", "--logfile", str(data / "redis.log"),
    ]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # socket_timeout bounds every call, so a hung server cannot stall a phase past its timeout for long.
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=30)
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError as exc:
                if proc.poll() is not None or time.monotonic() - t0 > 15:
                    result.status, result.reason = (
                        "failed",
                        f"redis-server not ready: {exc}; {_log_tail(data / 'redis.log')}",
                    )
                    return result
                time.sleep(0.05)
        result.startup_s = round(time.monotonic() - t0, 2)
        result.server_version = str(client.info("server")["redis_version"])
        body = os.urandom(BODY_SIZE)
        stream, group = "bench", "bench-group"
        client.xgroup_create(stream, group, id="0", mkstream=True)  # group from the start: it sees every message
        cpu: dict[str, float] = {}
        with _cpu_watch(lambda: {proc.pid}, cpu):
            start = time.perf_counter()
            deadline = start + PHASE_TIMEOUT_S
            pipe = client.pipeline(transaction=False)
            sent = 0
            while sent < n and time.perf_counter() < deadline:
                size = min(BATCH, n - sent)
                for _ in range(size):
                    pipe.xadd(stream, {"d": body})
                pipe.execute()
                sent += size
            elapsed = time.perf_counter() - start
        result.produce = Phase(sent, elapsed, sent < n, cpu["other_cores"], {"stream_len": client.xlen(stream)})
        with _cpu_watch(lambda: {proc.pid}, cpu):
            start = time.perf_counter()
            deadline = start + PHASE_TIMEOUT_S
            got = 0
            while got < sent and time.perf_counter() < deadline:
                resp: Any = client.xreadgroup(group, "c1", {stream: ">"}, count=BATCH)  # RESP2: [[stream, entries]]
                if not resp:
                    break
                ids = [mid for mid, _ in resp[0][1]]
                client.xack(stream, group, *ids)
                got += len(ids)
            elapsed = time.perf_counter() - start
        pending = int(client.xpending(stream, group)["pending"])
        result.consume = Phase(got, elapsed, got < sent, cpu["other_cores"], {"pending_after": pending})
        result.latency = asyncio.run(_redis_latency(port, latency_s))
        result.status = "ok"
        client.close()
    except (redis.RedisError, OSError) as exc:
        result.status, result.reason = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        _stop_pid(proc)  # SIGTERM: Redis flushes the AOF and exits; save "" means no RDB dump
    return result


# --- RabbitMQ --------------------------------------------------------------------------------------------------


class _ConfirmedPublisher:
    """Publish ``n`` persistent messages on a SelectConnection, at most ``window`` unconfirmed in flight.

    pika's BlockingConnection turns confirms into one round trip per publish, so the window needs the callback
    API; the ioloop stops on completion, on the deadline, or when the connection closes.
    """

    def __init__(self, params: Any, queue: str, n: int, body: bytes, window: int, timeout_s: float) -> None:
        import pika

        self.pika = pika
        self.queue, self.n, self.body, self.window = queue, n, body, window
        self.props = pika.BasicProperties(delivery_mode=2)  # persistent
        self.sent = self.acked = self.nacked = 0
        self.timed_out = False
        self.error: str | None = None
        self.channel: Any = None
        self.t0 = self.t1 = 0.0
        self.conn = pika.SelectConnection(
            params,
            on_open_callback=lambda c: c.channel(on_open_callback=self._on_channel),
            on_open_error_callback=self._on_open_error,
            on_close_callback=lambda c, reason: c.ioloop.stop(),
        )
        self.conn.ioloop.call_later(timeout_s, self._on_timeout)

    def run(self) -> Phase:
        self.conn.ioloop.start()
        if self.error:
            raise RuntimeError(self.error)
        end = self.t1 or time.perf_counter()
        return Phase(self.acked, end - self.t0, self.timed_out, extra={"nacked": self.nacked})

    def _on_open_error(self, conn: Any, exc: BaseException) -> None:
        self.error = f"connection failed: {exc}"
        conn.ioloop.stop()

    def _on_channel(self, channel: Any) -> None:
        self.channel = channel
        channel.confirm_delivery(self._on_confirm, callback=self._on_confirm_mode)

    def _on_confirm_mode(self, _frame: Any) -> None:
        self.t0 = time.perf_counter()
        self._fill()

    def _fill(self) -> None:
        while self.sent < self.n and self.sent - self.acked - self.nacked < self.window:
            self.channel.basic_publish("", self.queue, self.body, self.props)
            self.sent += 1

    def _on_confirm(self, frame: Any) -> None:
        method = frame.method
        # Delivery tags count publishes from 1; a multiple confirm covers everything up to its tag.
        count = method.delivery_tag - (self.acked + self.nacked) if method.multiple else 1
        if isinstance(method, self.pika.spec.Basic.Ack):
            self.acked += count
        else:
            self.nacked += count
        if self.acked + self.nacked >= self.n:
            self.t1 = time.perf_counter()
            self.conn.close()
        else:
            self._fill()

    def _on_timeout(self) -> None:
        if not self.t1:
            self.timed_out = True
            self.t1 = time.perf_counter()
        if self.conn.is_open:
            self.conn.close()


def _rabbit_consume(params: Any, queue: str, n: int, timeout_s: float) -> Phase:
    import pika

    conn = pika.BlockingConnection(params)
    try:
        channel = conn.channel()
        channel.basic_qos(prefetch_count=RABBIT_PREFETCH)
        got = 0

        def on_message(ch: Any, method: Any, _props: Any, _body: bytes) -> None:
            nonlocal got
            ch.basic_ack(method.delivery_tag)
            got += 1
            if got >= n:
                ch.stop_consuming()

        channel.basic_consume(queue, on_message, auto_ack=False)
        timer = conn.call_later(timeout_s, channel.stop_consuming)
        start = time.perf_counter()
        channel.start_consuming()
        elapsed = time.perf_counter() - start
        conn.remove_timeout(timer)
        left = channel.queue_declare(queue, passive=True).method.message_count
        return Phase(got, elapsed, got < n, extra={"left_in_queue": left})
    finally:
        if conn.is_open:
            conn.close()


def _resolve(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


async def _rabbit_latency(params: Any, seconds: float) -> dict[str, Any]:
    """Through a quorum queue of its own: publishes without waiting for confirms (a quorum queue hands a message
    to consumers only once the Raft log has committed it), a basic_consume acking each message."""
    import pika
    from pika.adapters.asyncio_connection import AsyncioConnection

    loop = asyncio.get_running_loop()
    queue = "bench_latency"
    expected = paced_total(LATENCY_RATE, seconds, LATENCY_TICK_MS)
    latencies: list[float] = []
    opened: asyncio.Future[Any] = loop.create_future()
    closed: asyncio.Future[Any] = loop.create_future()
    conn = AsyncioConnection(
        params,
        on_open_callback=opened.set_result,
        on_open_error_callback=lambda _c, exc: opened.set_exception(RuntimeError(f"connection failed: {exc!r}")),
        on_close_callback=lambda _c, _exc: _resolve(closed, None),
        custom_ioloop=loop,
    )
    await asyncio.wait_for(opened, 30)
    try:

        async def call(start: Callable[[Callable[[Any], None]], Any]) -> Any:
            done: asyncio.Future[Any] = loop.create_future()
            start(lambda arg: _resolve(done, arg))
            return await asyncio.wait_for(done, 30)

        pub = await call(lambda cb: conn.channel(on_open_callback=cb))
        sub = await call(lambda cb: conn.channel(on_open_callback=cb))
        await call(lambda cb: pub.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"}, callback=cb))
        await call(lambda cb: sub.basic_qos(prefetch_count=RABBIT_PREFETCH, callback=cb))

        def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
            latencies.append(latency_ms(body, time.time_ns()))
            ch.basic_ack(method.delivery_tag)

        sub.basic_consume(queue, on_message)
        persistent = pika.BasicProperties(delivery_mode=2)

        async def send(_k: int, n: int, stamp: int) -> None:
            body = stamped_body(stamp, BODY_SIZE)
            for _ in range(n):
                pub.basic_publish("", queue, body, persistent)

        await asyncio.sleep(0.3)
        paced = await paced_sends(LATENCY_RATE, seconds, LATENCY_TICK_MS, send)
        await _await_count(latencies, expected, 10)
    finally:
        if not closed.done():
            conn.close()
            await asyncio.wait_for(closed, 30)
    return _latency_result(latencies, paced, expected)


def rabbitmq_node(base: Path, name: str) -> tuple[int, int, dict[str, str]]:
    """A private RabbitMQ node's files under ``base`` and its environment: (AMQP port, epmd port, env).

    Everything listens on loopback only (Erlang distribution too, through our own epmd), nothing is read from
    /etc/rabbitmq, and the Erlang cookie is created in ``base``, not in root's home."""
    port, epmd_port, dist_port = _free_port(), _free_port(), _free_port()
    (base / "home").mkdir(parents=True)
    (base / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{port}\nloopback_users.guest = true\ndisk_free_limit.absolute = 1GB\n"
    )
    (base / "enabled_plugins").write_text("[].\n")  # no management plugin: nothing else listens
    (base / "rabbitmq-env.conf").write_text("")
    env = {
        **os.environ,
        "HOME": str(base / "home"),
        "RABBITMQ_NODENAME": f"{name}{port}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
        "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "ERL_EPMD_PORT": str(epmd_port),
    }
    return port, epmd_port, env


def bench_rabbitmq(n: int, workdir: Path, latency_s: float) -> PeerResult:
    binary = RABBIT_SERVER if os.access(RABBIT_SERVER, os.X_OK) else None
    settings = {
        "queue": "durable quorum queue (x-queue-type=quorum), single node",
        "delivery_mode": 2,
        "publisher_confirms_window": RABBIT_WINDOW,
        "prefetch": RABBIT_PREFETCH,
        "ack": "one basic_ack per message",
    }
    result = PeerResult("rabbitmq", "not installed", settings=settings)
    if (why := _missing(binary, str(RABBIT_SERVER), "pika")) is not None:
        result.reason = why
        return result
    if os.geteuid() != 0:
        # The Debian scripts in /usr/lib/rabbitmq/bin expect root (they read/write root-owned paths).
        result.status, result.reason = "skipped", "needs root to start rabbitmq-server from /usr/lib/rabbitmq/bin"
        return result
    epmd_bin = _which("epmd", "/usr/lib/erlang/bin/epmd")
    if epmd_bin is None:
        result.status, result.reason = "failed", "epmd not found (erlang-base missing)"
        return result
    import pika

    result.client_version = pika.__version__
    base = workdir / "rabbitmq"
    port, epmd_port, env = rabbitmq_node(base, "orbitbench")
    epmd = subprocess.Popen(
        [str(epmd_bin), "-address", "127.0.0.1", "-port", str(epmd_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = open(base / "stdout.log", "wb")  # noqa: SIM115 - closed in the finally below
    server: subprocess.Popen[bytes] | None = None
    server_pids: set[int] = set()
    try:
        t0 = time.monotonic()
        server = subprocess.Popen([str(binary)], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=base)
        params = pika.ConnectionParameters("127.0.0.1", port, connection_attempts=1, socket_timeout=10)
        while True:
            try:
                pika.BlockingConnection(params).close()
                break
            except pika.exceptions.AMQPError as exc:
                if server.poll() is not None or time.monotonic() - t0 > 120:
                    state = "exited" if server.poll() is not None else "not ready after 120 s"
                    result.status, result.reason = (
                        "failed",
                        f"rabbitmq-server {state} ({exc!r}): {_log_tail(base / 'stdout.log')}",
                    )
                    return result
                time.sleep(0.5)
        result.startup_s = round(time.monotonic() - t0, 2)
        server_pids = _tree(server.pid)
        conn = pika.BlockingConnection(params)
        version = conn._impl.server_properties.get("version", b"?")
        result.server_version = version.decode() if isinstance(version, bytes) else str(version)
        queue = "bench_quorum"
        conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
        conn.close()
        body = os.urandom(BODY_SIZE)
        cpu: dict[str, float] = {}
        with _cpu_watch(lambda: server_pids, cpu):
            produce = _ConfirmedPublisher(params, queue, n, body, RABBIT_WINDOW, PHASE_TIMEOUT_S).run()
        produce.other_cores = cpu["other_cores"]
        result.produce = produce
        with _cpu_watch(lambda: server_pids, cpu):
            consume = _rabbit_consume(params, queue, produce.messages, PHASE_TIMEOUT_S)
        consume.other_cores = cpu["other_cores"]
        result.consume = consume
        result.latency = asyncio.run(_rabbit_latency(params, latency_s))
        result.status = "ok"
    except (pika.exceptions.AMQPError, RuntimeError, OSError) as exc:
        result.status, result.reason = "failed", f"{type(exc).__name__}: {exc!r}"
    finally:
        if server is not None:
            server_pids |= _tree(server.pid)  # collect beam.smp & co before the wrapper exits
            _stop_pid(server, grace_s=60)  # the wrapper traps SIGTERM and stops the node cleanly
            for pid in server_pids - {server.pid}:
                # Anything of the node still alive after the wrapper is gone (it should not be).
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue
        _stop_pid(epmd)
        log.close()
    return result


# --- NATS JetStream --------------------------------------------------------------------------------------------


async def _nats_latency(js: Any, seconds: float) -> dict[str, Any]:
    """A stream of its own; ``publish_async`` per message, an ordered push consumer (no acks, like an offset pull)."""
    from nats.js.api import StorageType, StreamConfig

    await js.add_stream(StreamConfig(name="LATENCY", subjects=["latency.>"], storage=StorageType.FILE, num_replicas=1))
    expected = paced_total(LATENCY_RATE, seconds, LATENCY_TICK_MS)
    latencies: list[float] = []

    async def on_message(msg: Any) -> None:
        latencies.append(latency_ms(msg.data, time.time_ns()))

    sub = await js.subscribe("latency.q", cb=on_message, ordered_consumer=True)

    async def send(_k: int, n: int, stamp: int) -> None:
        body = stamped_body(stamp, BODY_SIZE)
        for _ in range(n):
            await js.publish_async("latency.q", body)

    try:
        await asyncio.sleep(0.3)
        paced = await paced_sends(LATENCY_RATE, seconds, LATENCY_TICK_MS, send)
        await _await_count(latencies, expected, 10)
    finally:
        await sub.unsubscribe()
    return _latency_result(latencies, paced, expected)


async def _nats_workload(port: int, n: int, result: PeerResult, server_pid: int, t0: float, latency_s: float) -> None:
    import nats
    from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

    async def ignore_error(exc: Exception) -> None:
        # nats-py logs every connection error through this callback; readiness retries below handle them.
        return None

    # Wait for the port first: a refused nats.connect costs seconds of client-side backoff.
    while not _port_open(port) and time.monotonic() - t0 < 15:
        await asyncio.sleep(0.05)
    while True:
        try:
            nc = await nats.connect(
                f"nats://127.0.0.1:{port}", connect_timeout=1, max_reconnect_attempts=0, error_cb=ignore_error
            )
            break
        except (OSError, nats.errors.Error) as exc:
            if time.monotonic() - t0 > 15:
                raise TimeoutError(f"nats-server not ready after 15 s: {exc!r}") from exc
            await asyncio.sleep(0.1)
    result.startup_s = round(time.monotonic() - t0, 2)
    try:
        v = nc.connected_server_version
        result.server_version = f"{v.major}.{v.minor}.{v.patch}"
        js = nc.jetstream(publish_async_max_pending=NATS_WINDOW, timeout=30)
        await js.add_stream(StreamConfig(name="BENCH", subjects=["bench.>"], storage=StorageType.FILE, num_replicas=1))
        body = os.urandom(BODY_SIZE)
        cpu: dict[str, float] = {}
        with _cpu_watch(lambda: {server_pid}, cpu):
            start = time.perf_counter()
            deadline = start + PHASE_TIMEOUT_S
            sent, timed_out = 0, False
            while sent < n and time.perf_counter() < deadline:
                await js.publish_async("bench.q", body)  # waits while NATS_WINDOW PubAcks are outstanding
                sent += 1
            try:
                await asyncio.wait_for(js.publish_async_completed(), max(1.0, deadline - time.perf_counter()))
            except TimeoutError:
                timed_out = True
            elapsed = time.perf_counter() - start
        stored = (await js.stream_info("BENCH")).state.messages
        result.produce = Phase(
            stored, elapsed, timed_out or sent < n, cpu["other_cores"], {"published": sent, "stored": stored}
        )
        sub = await js.pull_subscribe(
            "bench.q", durable="bench", config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=-1)
        )
        with _cpu_watch(lambda: {server_pid}, cpu):
            start = time.perf_counter()
            deadline = start + PHASE_TIMEOUT_S
            got = 0
            while got < stored and time.perf_counter() < deadline:
                try:
                    msgs = await sub.fetch(BATCH, timeout=5)
                except nats.errors.TimeoutError:
                    continue
                for msg in msgs:
                    await msg.ack()  # fire-and-forget ack, as the client documents for throughput
                got += len(msgs)
            await nc.flush(timeout=30)  # the acks are on the wire before the clock stops
            elapsed = time.perf_counter() - start
        info = await js.consumer_info("BENCH", "bench")
        result.consume = Phase(
            got, elapsed, got < stored, cpu["other_cores"], {"ack_pending_after_flush": info.num_ack_pending}
        )
        result.latency = await _nats_latency(js, latency_s)
        result.status = "ok"
    finally:
        await nc.close()


def bench_nats(n: int, workdir: Path, latency_s: float) -> PeerResult:
    binary = _which("nats-server", "/usr/sbin/nats-server", "/usr/bin/nats-server")
    settings = {
        "stream": "file storage, R1 (PubAck = written to the OS; no per-message fsync)",
        "publish_async_max_pending": NATS_WINDOW,
        "consumer": "durable pull, AckExplicit",
        "fetch": BATCH,
        "ack": "msg.ack() per message",
    }
    result = PeerResult("nats-jetstream", "not installed", settings=settings)
    if (why := _missing(binary, "nats-server", "nats")) is not None:
        result.reason = why
        return result
    assert binary is not None
    from nats.aio.client import __version__ as nats_py_version

    result.client_version = nats_py_version
    port = _free_port()
    base = workdir / "nats"
    base.mkdir()
    conf = base / "nats.conf"
    conf.write_text(
        f"listen: 127.0.0.1:{port}\n"
        f'jetstream {{\n  store_dir: "{base / "js"}"\n  max_memory_store: 256MB\n  max_file_store: 8GB\n}}\n'
    )
    log = open(base / "nats.log", "wb")  # noqa: SIM115 - closed in the finally below
    t0 = time.monotonic()
    proc = subprocess.Popen([str(binary), "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT)
    try:
        asyncio.run(_nats_workload(port, n, result, proc.pid, t0, latency_s))
    except Exception as exc:  # any client/server failure is recorded; the other peers still run
        result.status = "failed"
        result.reason = f"{type(exc).__name__}: {exc!r}; {_log_tail(base / 'nats.log')}"
    finally:
        _stop_pid(proc)
        log.close()
    return result


# --- entry points ----------------------------------------------------------------------------------------------

PEERS: dict[str, Callable[[int, Path, float], PeerResult]] = {
    "redis-streams": bench_redis,
    "rabbitmq": bench_rabbitmq,
    "nats-jetstream": bench_nats,
}


def run(quick: bool = False, n: int | None = None, peers: list[str] | None = None) -> dict[str, Any]:
    """Measure every installed peer; the result has one entry per peer (``status`` says whether it ran)."""
    n = n or (N_QUICK if quick else N_FULL)
    latency_s = LATENCY_SECONDS_QUICK if quick else LATENCY_SECONDS
    out: dict[str, Any] = {"messages": n, "body_size": BODY_SIZE, "phase_timeout_s": PHASE_TIMEOUT_S, "peers": {}}
    for name in peers or list(PEERS):
        # A fresh data dir per peer, removed afterwards (the servers have been stopped by then).
        with tempfile.TemporaryDirectory(prefix=f"bench-peer-{name}-") as tmp:
            print(f"bench_peers: {name} ({n} messages)", file=sys.stderr, flush=True)
            try:
                result = PEERS[name](n, Path(tmp), latency_s)
            except Exception as exc:  # recorded in the result; the other peers and e2e still report
                result = PeerResult(name, "failed", reason=f"{type(exc).__name__}: {exc!r}")
        out["peers"][name] = result.as_dict()
        print(f"bench_peers: {name}: {summary_line(result.as_dict())}", file=sys.stderr, flush=True)
    return out


def summary_line(peer: dict[str, Any]) -> str:
    if peer["status"] != "ok":
        return f"{peer['status']}: {peer['reason']}"
    line = f"produce {peer['produce']['msgs_per_s']:,} msg/s, consume {peer['consume']['msgs_per_s']:,} msg/s"
    if lat := peer.get("latency"):
        line += (
            f", latency at {lat['target_rate']:,} msg/s p50 {lat['latency_ms_p50']} ms p99 {lat['latency_ms_p99']} ms"
        )
    return line


def compare(
    peers: dict[str, Any], orbit_produce: float, orbit_consume: float, orbit_latency_p99: float | None = None
) -> dict[str, Any]:
    """One summary entry per peer: its rates and OrbitMQ's rate divided by the peer's, and the peer's latency p99
    divided by OrbitMQ's (every ratio > 1: OrbitMQ better)."""
    out: dict[str, Any] = {}
    for name, peer in peers["peers"].items():
        if peer["status"] != "ok":
            out[name] = f"{peer['status']}: {peer['reason']}"
            continue
        produce, consume = peer["produce"]["msgs_per_s"], peer["consume"]["msgs_per_s"]
        out[name] = {
            "produce_msgs_per_s": produce,
            "consume_msgs_per_s": consume,
            "orbitmq_batched_produce_ratio": round(orbit_produce / produce, 2) if produce else None,
            "orbitmq_pull_batch_consume_ratio": round(orbit_consume / consume, 2) if consume else None,
        }
        if (lat := peer.get("latency")) is not None:
            p99 = lat["latency_ms_p99"]
            out[name]["latency_ms_p50"] = lat["latency_ms_p50"]
            out[name]["latency_ms_p99"] = p99
            if orbit_latency_p99:
                out[name]["peer_latency_p99_over_orbitmq"] = round(p99 / orbit_latency_p99, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"{N_QUICK:,} messages instead of {N_FULL:,}")
    p.add_argument("--n", type=int, default=None, help="messages per peer (overrides --quick)")
    p.add_argument("peers", nargs="*", help=f"peers to run (default: all of {list(PEERS)})")
    args = p.parse_args(argv)
    if unknown := set(args.peers) - set(PEERS):
        p.error(f"unknown peers {sorted(unknown)}; choose from {list(PEERS)}")
    result = run(quick=args.quick, n=args.n, peers=args.peers or None)
    path = write_result("peers", result)
    print(json.dumps({name: summary_line(peer) for name, peer in result["peers"].items()}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
