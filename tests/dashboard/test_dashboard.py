"""The dashboard in a real browser against a real name server and broker: log in, every page, create a topic, send
and find a message, resend a dead letter, delete with confirmation; screenshots in the test's temp dir."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

import oms
from orbitmq.errors import Code
from orbitmq.proto import consume_pb2, consume_pb2_grpc
from tests.conftest import BrokerFactory, BrokerHandle, NamesrvHandle
from tests.procs import ServerProcess, free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

PASSWORD = "s3cret-pass"


class Dashboard:
    def __init__(self, url: str, process: ServerProcess) -> None:
        self.url = url
        self.process = process


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvHandle, BrokerHandle, Dashboard]]:
    tmp = tmp_path_factory.mktemp("dashboard")
    factory = BrokerFactory(tmp)
    try:
        ns = factory.namesrv()
        broker = factory.broker(ns, name="dash-a", cluster="DashCluster")
        with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
            wait_until(lambda: len(rm.cluster_list()) == 1, 20, what="the broker registered")
        users = tmp / "users"
        users.write_text(f"# dashboard accounts\nops:{PASSWORD}\n")
        port = free_port()
        args = [sys.executable, "-m", "dashboard.cli", "-n", ns.addr, "--port", str(port), "--users", str(users)]
        process = ServerProcess(args, tmp / "dashboard.log").start()
        try:
            process.wait_port(port, 60)
            yield ns, broker, Dashboard(f"http://127.0.0.1:{port}", process)
        finally:
            process.stop()
    finally:
        factory.stop_all()


@pytest.fixture
def page(browser: Any, stack: Any, tmp_path: Path) -> Iterator[Any]:
    context = browser.new_context()
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    yield pg
    pg.screenshot(path=str(tmp_path / "last.png"), full_page=True)
    context.close()


def login(page: Any, url: str) -> None:
    page.goto(url + "/")
    assert page.url.startswith(url + "/login"), "everything but the login page needs a session"
    page.fill("#username", "ops")
    page.fill("#password", PASSWORD)
    page.click("#login")
    page.wait_for_url(re.compile(r".*/cluster$"))


@pytest.mark.timeout(180)
def test_click_through_every_page(page: Any, stack: Any, tmp_path: Path) -> None:
    ns, broker, dash = stack
    # a wrong password is refused, with a message and no session
    page.goto(dash.url + "/login")
    page.fill("#username", "ops")
    page.fill("#password", "wrong")
    page.click("#login")
    assert "wrong user name or password" in page.inner_text("#error")
    assert page.goto(dash.url + "/topics").url.startswith(dash.url + "/login")

    login(page, dash.url)
    assert "dash-a" in page.inner_text("#brokers") and broker.addr in page.inner_text("#brokers")
    page.screenshot(path=str(tmp_path / "cluster.png"), full_page=True)

    # topics: create one, send a test message, find it
    page.click("text=Topics")
    page.fill("#new-topic", "DashOrders")
    page.click("#create")
    page.wait_for_url(re.compile(r".*/topics/DashOrders.*"))
    assert "topic DashOrders created" in page.inner_text("#done")
    assert "dash-a" in page.inner_text("#route")
    page.fill("#body", "hello from the browser")
    page.fill("#tags", "TagB")
    page.fill("#keys", "order-42")
    page.click("#send-button")
    sent = page.inner_text("#done")
    assert sent.startswith("sent "), sent
    message_id = sent.split()[1]
    page.screenshot(path=str(tmp_path / "topic.png"), full_page=True)
    page.goto(dash.url + "/topics")
    assert "DashOrders" in page.inner_text("#topics")
    page.screenshot(path=str(tmp_path / "topics.png"), full_page=True)

    page.click("text=Messages")
    page.fill("#topic", "DashOrders")
    page.fill("#key", "order-42")
    page.click("#search-button")
    assert message_id in page.inner_text("#found")
    page.fill("#key", "")
    page.fill("#msgid", message_id)
    page.click("#search-button")
    page.click(f"text={message_id}")
    assert "hello from the browser" in page.inner_text("#message-body")
    assert "TagB" in page.inner_text("#detail")
    page.screenshot(path=str(tmp_path / "message.png"), full_page=True)
    page.goto(dash.url + "/messages?topic=DashOrders")
    assert "hello from the browser" in page.inner_text("#rows")

    # live traffic (polled by the page's script) and the replicas' HA state
    page.click("text=Traffic")
    page.wait_for_function("document.querySelector('#per-topic tbody').innerText.includes('DashOrders')")
    assert page.inner_text("#in-now") != "-"
    page.screenshot(path=str(tmp_path / "traffic.png"), full_page=True)
    page.click("text=HA")
    assert "ASYNC_MASTER" in page.inner_text("#ha-dash-a")
    page.screenshot(path=str(tmp_path / "ha.png"), full_page=True)
    page.click("text=ACL")
    assert "aclEnable is off" in page.inner_text("#no-acl")
    page.screenshot(path=str(tmp_path / "acl.png"), full_page=True)

    # a consumer group with a client online (gRPC), its progress and a dead letter resent
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap:
        consumer = ap.create_push_consumer(consumer_id="GDash")
        consumer.attach_queue("DashOrders", lambda message, context: context.ack())
        consumer.startup()
        try:
            with ap.resource_manager() as rm:
                view = rm.query_message_by_id(message_id, topic="DashOrders")[0]
            with grpc.insecure_channel(broker.addr) as channel:  # consumerSendMsgBack, straight to the DLQ
                back = consume_pb2_grpc.ConsumeStub(channel).SendBack(
                    consume_pb2.SendBackRequest(
                        group="GDash", topic="DashOrders", commitlog_offset=view.commitlog_offset, delay_level=-1
                    ),
                    timeout=10,
                )
            assert back.status.code == Code.OK
            page.click("text=Consumer groups")
            page.click("#groups >> text=GDash")

            def client_listed() -> bool:
                page.reload()
                return "PUSH_CONSUMER" in page.inner_text("#clients")

            wait_until(client_listed, 30, what="the gRPC push consumer listed", interval=0.5)
            assert "DashOrders" in page.inner_text("#clients")
            page.screenshot(path=str(tmp_path / "group.png"), full_page=True)
        finally:
            consumer.shutdown()

    page.click("text=Dead letters")
    page.fill("#group", "GDash")
    page.click("#dlq-button")
    assert "hello from the browser" in page.inner_text("#dead-letters")
    page.click(".resend")
    assert "resent to DashOrders" in page.inner_text("#done")
    page.screenshot(path=str(tmp_path / "dlq.png"), full_page=True)
    page.goto(dash.url + f"/messages?topic=DashOrders&id={message_id}")
    assert page.inner_text("#found").count(message_id) == 2, "the original and the resent copy"

    # destructive actions ask first
    page.goto(dash.url + "/topics/DashOrders")
    page.click("#delete")
    assert "Delete topic DashOrders" in page.inner_text("#question")
    page.click("#confirm")
    assert "topic DashOrders deleted" in page.inner_text("#done")
    assert "DashOrders" not in page.inner_text("#topics")
    assert "deleted topic DashOrders" in dash.process.log(), "destructive actions are logged"
    page.click("#logout")
    assert page.goto(dash.url + "/cluster").url.startswith(dash.url + "/login")


@pytest.mark.timeout(120)
def test_standalone_broker_serves_the_dashboard(tmp_path: Path) -> None:
    """``mqbroker --standalone --dashboard-port``: the one-command set-up with a console, its password in the log."""
    import http.cookiejar
    import urllib.parse
    import urllib.request

    port, dash_port, ns_port = free_port(), free_port(), free_port()
    args = [
        sys.executable, "-m", "broker.cli", "--standalone", "--store", str(tmp_path / "store"), "--port", str(port),
        "--namesrv-port", str(ns_port), "--dashboard-port", str(dash_port),
    ]  # fmt: skip
    broker = ServerProcess(args, tmp_path / "broker.log").start()
    try:
        broker.wait_port(dash_port, 60)
        found = re.search(r"log in as admin with password (\S+)", broker.log())
        assert found, broker.log()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        base = f"http://127.0.0.1:{dash_port}"
        form = urllib.parse.urlencode({"username": "admin", "password": found.group(1), "next": "/cluster"}).encode()

        def cluster_page() -> str:
            with opener.open(base + "/login", form, timeout=10) as response:
                return str(response.read().decode())

        wait_until(lambda: f"127.0.0.1:{port}" in cluster_page(), 30, what="the broker on the cluster page")
    finally:
        broker.stop()
    with pytest.raises(OSError):  # the dashboard stopped with the broker
        urllib.request.urlopen(f"http://127.0.0.1:{dash_port}/login", timeout=2)
