"""The dashboard's pages, in RocketMQ Dashboard's order: cluster, topics, consumer groups, messages, dead letters.

Every read and write goes through the ``oms`` resource manager (and an ``oms`` producer and pull consumer for test
messages and browsing); blocking calls run in Starlette's thread pool. Destructive actions ask for confirmation on a
page of their own and are logged with the user who confirmed them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

import oms
from dashboard.auth import COOKIE, SESSION_S, Sessions, Users, login_required
from oms.errors import OMSException
from oms.mqadmin.message.reading import chosen_queues, read_queue
from oms.mqadmin.options import parse_timestamp
from orbitmq.topics import dlq_topic, is_dlq_topic, is_retry_topic, is_system_topic

log = logging.getLogger("dashboard")
T = TypeVar("T")
BROWSE_GROUP = "mqdashboard-browser"  # the pull consumer that reads messages for the pages; it commits nothing
BROWSE_LIMIT = 200  # messages a search page shows
TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


@dataclass
class Backend:
    """The access point the pages use, opened once for the app's life."""

    access_point: oms.MessagingAccessPoint
    resources: Any
    producer: Any

    @classmethod
    def open(cls, url: str, access_key: str | None = None, secret_key: str | None = None) -> Backend:
        """``access_key``/``secret_key``: an ACL account (admin, to administer) when the brokers have ACL on."""
        ap = oms.get_messaging_access_point(url, access_key=access_key or None, secret_key=secret_key or None)
        ap.startup()
        rm = ap.resource_manager()
        producer = ap.create_producer()
        producer.startup()
        return cls(ap, rm, producer)

    def close(self) -> None:
        self.producer.shutdown()
        self.resources.shutdown()
        self.access_point.shutdown()


async def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await run_in_threadpool(fn, *args, **kwargs)


def page(request: Request, template: str, **context: Any) -> Response:
    context.setdefault("user", getattr(request.state, "user", None))
    context.setdefault("done", request.query_params.get("done"))
    context.setdefault("error", None)
    return TEMPLATES.TemplateResponse(request, template, context)


def back(path: str, **params: str) -> RedirectResponse:
    return RedirectResponse(f"{path}?{urlencode(params)}" if params else path, status_code=303)


def create_app(backend: Backend, users: Users, session_key: bytes) -> Starlette:
    sessions = Sessions(session_key)
    rm = backend.resources

    async def login_form(request: Request) -> Response:
        return page(request, "login.html", next=request.query_params.get("next", "/"))

    async def login(request: Request) -> Response:
        form = await request.form()
        name, password = str(form.get("username", "")), str(form.get("password", ""))
        target = str(form.get("next", "/")) or "/"
        if not target.startswith("/") or target.startswith("//"):
            target = "/"
        if not users.check(name, password):
            log.warning("dashboard login refused for %r from %s", name, request.client.host if request.client else "-")
            return page(request, "login.html", next=target, error="wrong user name or password")
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(COOKIE, sessions.issue(name), max_age=SESSION_S, httponly=True, samesite="strict")
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    async def home(request: Request) -> Response:
        return RedirectResponse("/cluster", status_code=303)

    # -- cluster -------------------------------------------------------------------------------------------------

    async def cluster(request: Request) -> Response:
        brokers = await call(rm.cluster_list, runtime=True)
        return page(request, "cluster.html", brokers=brokers)

    # -- topics --------------------------------------------------------------------------------------------------

    async def topics(request: Request) -> Response:
        configs = await call(rm.topic_configs)
        rows: dict[str, dict[str, Any]] = {}
        for info in configs:
            row = rows.setdefault(
                info.topic,
                {"topic": info.topic, "type": info.message_type, "queues": 0, "brokers": [], "perm": info.perm_string},
            )
            row["queues"] += info.write_queue_nums
            row["brokers"].append(info.broker_name)
        show_system = request.query_params.get("system") == "1"
        listed = [
            r
            for name, r in sorted(rows.items())
            if show_system or not (is_system_topic(name) or is_retry_topic(name) or is_dlq_topic(name))
        ]
        return page(request, "topics.html", topics=listed, show_system=show_system)

    async def topic_create(request: Request) -> Response:
        form = await request.form()
        name = str(form.get("topic", "")).strip()
        queues = int(str(form.get("queues", "8")) or 8)
        kind = str(form.get("message_type", "NORMAL"))
        try:
            await call(rm.create_topic, name, read_queue_nums=queues, write_queue_nums=queues, message_type=kind)
        except (OMSException, ValueError) as exc:
            return page(request, "topics.html", topics=[], show_system=False, error=str(exc))
        log.info("dashboard: %s created topic %s (%d queues, %s)", request.state.user, name, queues, kind)
        return back(f"/topics/{quote(name)}", done=f"topic {name} created")

    async def topic(request: Request) -> Response:
        name = request.path_params["topic"]
        try:
            route = await call(rm.topic_route, name)
            status = await call(rm.topic_status, name)
        except OMSException as exc:
            return page(request, "error.html", error=str(exc))
        return page(request, "topic.html", topic=name, route=route, status=status)

    async def topic_send(request: Request) -> Response:
        name = request.path_params["topic"]
        form = await request.form()
        body = str(form.get("body", ""))
        tags = str(form.get("tags", "")).strip() or None
        keys = [k for k in str(form.get("keys", "")).split() if k]
        try:
            result = await call(backend.producer.send, oms.BytesMessage(body, name, tags=tags, keys=keys or None))
        except OMSException as exc:
            return back(f"/topics/{quote(name)}", done=f"send failed: {exc}")
        log.info("dashboard: %s sent a test message to %s (%s)", request.state.user, name, result.message_id)
        return back(f"/topics/{quote(name)}", done=f"sent {result.message_id}")

    async def topic_delete(request: Request) -> Response:
        name = request.path_params["topic"]
        if request.method == "GET":
            return page(
                request,
                "confirm.html",
                what=f"Delete topic {name} (its messages and offsets)?",
                action=request.url.path,
            )
        deleted = await call(rm.delete_topic, name)
        log.warning("dashboard: %s deleted topic %s on %s", request.state.user, name, ", ".join(deleted))
        return back("/topics", done=f"topic {name} deleted")

    # -- consumer groups -----------------------------------------------------------------------------------------

    async def groups(request: Request) -> Response:
        infos = await call(rm.list_groups)
        names = sorted({g.group for g in infos})
        return page(request, "groups.html", groups=names)

    async def group(request: Request) -> Response:
        name = request.path_params["group"]
        progress = await call(rm.consumer_progress, name)
        connections = await call(rm.client_connections, group=name)
        return page(request, "group.html", group=name, progress=progress, connections=connections)

    async def group_reset(request: Request) -> Response:
        name = request.path_params["group"]
        form = await request.form()
        topic_name = str(form.get("topic", ""))
        if request.method == "POST" and form.get("confirmed") != "yes":
            what = f"Reset {name} on {topic_name} to {form.get('timestamp')}?"
            hidden = {"topic": topic_name, "timestamp": str(form.get("timestamp", "")), "confirmed": "yes"}
            return page(request, "confirm.html", what=what, action=request.url.path, hidden=hidden)
        try:
            when = parse_timestamp(str(form.get("timestamp", "now")))
            await call(rm.reset_offset_by_time, name, topic_name, when)
        except (OMSException, ValueError) as exc:
            return back(f"/groups/{quote(name)}", done=f"reset failed: {exc}")
        log.warning("dashboard: %s reset %s on %s to %s", request.state.user, name, topic_name, when)
        return back(f"/groups/{quote(name)}", done=f"offsets of {topic_name} reset")

    async def group_skip(request: Request) -> Response:
        name = request.path_params["group"]
        form = await request.form()
        topic_name = str(form.get("topic", ""))
        if form.get("confirmed") != "yes":
            hidden = {"topic": topic_name, "confirmed": "yes"}
            what = f"Skip the backlog of {name} on {topic_name}?"
            return page(request, "confirm.html", what=what, action=request.url.path, hidden=hidden)
        await call(rm.skip_accumulated, name, topic_name)
        log.warning("dashboard: %s skipped the backlog of %s on %s", request.state.user, name, topic_name)
        return back(f"/groups/{quote(name)}", done=f"backlog of {topic_name} skipped")

    async def group_delete(request: Request) -> Response:
        name = request.path_params["group"]
        if request.method == "GET":
            return page(
                request, "confirm.html", what=f"Delete consumer group {name} and its offsets?", action=request.url.path
            )
        await call(rm.delete_group, name)
        log.warning("dashboard: %s deleted group %s", request.state.user, name)
        return back("/groups", done=f"group {name} deleted")

    # -- messages ------------------------------------------------------------------------------------------------

    async def messages(request: Request) -> Response:
        q = request.query_params
        topic_name, key, msg_id = q.get("topic", "").strip(), q.get("key", "").strip(), q.get("id", "").strip()
        found: list[Any] = []
        rows: list[dict[str, Any]] = []
        error = None
        try:
            if msg_id:
                found = await call(rm.query_message_by_id, msg_id, topic=topic_name or None)
            elif key and topic_name:
                found = await call(rm.query_message_by_key, topic_name, key)
            elif topic_name:
                begin = parse_timestamp(q["begin"]) if q.get("begin") else None
                end = parse_timestamp(q["end"]) if q.get("end") else None
                rows = await call(browse, backend.access_point, topic_name, begin, end)
        except (OMSException, ValueError) as exc:
            error = str(exc)
        return page(
            request, "messages.html", q=q, found=found, rows=rows, error=error, searched=bool(topic_name or msg_id)
        )

    async def message(request: Request) -> Response:
        p = request.path_params
        view = await call(rm.query_message_by_offset, p["topic"], int(p["qid"]), int(p["offset"]), broker=p["broker"])
        consumed = []
        for g in sorted({g.group for g in await call(rm.list_groups)}):
            progress = await call(rm.consumer_progress, g, p["topic"])
            for q in progress.queues:
                if q.broker_name == p["broker"] and q.queue_id == int(p["qid"]) and q.consumer_offset >= 0:
                    consumed.append((g, q.consumer_offset > view.queue_offset))
        return page(
            request, "message.html", m=view, body=view.body.decode("utf-8", errors="replace"), consumed=consumed
        )

    # -- HA and traffic ------------------------------------------------------------------------------------------

    async def ha(request: Request) -> Response:
        brokers = await call(rm.cluster_list, runtime=True)
        groups: dict[str, list[Any]] = {}
        for b in brokers:
            groups.setdefault(b.broker_name, []).append(b)
        return page(request, "ha.html", groups=sorted(groups.items()))

    async def traffic(request: Request) -> Response:
        return page(request, "traffic.html")

    async def traffic_json(request: Request) -> Response:
        rows = await call(rm.stats_all)
        topics: dict[str, dict[str, float]] = {}
        for r in rows:
            t = topics.setdefault(r.topic, {"in_tps": r.in_tps, "out_tps": 0.0})
            t["out_tps"] += r.out_tps
        total_in = sum(t["in_tps"] for t in topics.values())
        total_out = sum(t["out_tps"] for t in topics.values())
        return JSONResponse({"in_tps": total_in, "out_tps": total_out, "topics": topics})

    async def acl(request: Request) -> Response:
        accounts = await call(rm.acl_accounts)
        return page(request, "acl.html", accounts=accounts)

    # -- dead letters --------------------------------------------------------------------------------------------

    async def dlq(request: Request) -> Response:
        name = request.query_params.get("group", "").strip()
        rows: list[dict[str, Any]] = []
        error = None
        if name:
            try:
                rows = await call(browse, backend.access_point, dlq_topic(name), None, None)
            except OMSException as exc:
                error = str(exc)
        return page(request, "dlq.html", group=name, rows=rows, error=error)

    async def dlq_resend(request: Request) -> Response:
        name = request.path_params["group"]
        form = await request.form()
        try:
            result = await call(
                rm.resend_dead_letter,
                name,
                broker=str(form.get("broker")),
                offset=int(str(form.get("offset"))),
                queue_id=int(str(form.get("queue_id", "0"))),
            )
        except (OMSException, ValueError) as exc:
            return back("/dlq", group=name, done=f"resend failed: {exc}")
        log.warning("dashboard: %s resent a dead letter of %s to %s", request.state.user, name, result.topic)
        return back("/dlq", group=name, done=f"resent to {result.topic} as {result.message_id}")

    routes = [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/", home),
        Route("/cluster", cluster),
        Route("/topics", topics, methods=["GET"]),
        Route("/topics", topic_create, methods=["POST"]),
        Route("/topics/{topic}", topic),
        Route("/topics/{topic}/send", topic_send, methods=["POST"]),
        Route("/topics/{topic}/delete", topic_delete, methods=["GET", "POST"]),
        Route("/groups", groups),
        Route("/groups/{group}", group),
        Route("/groups/{group}/reset", group_reset, methods=["POST"]),
        Route("/groups/{group}/skip", group_skip, methods=["POST"]),
        Route("/groups/{group}/delete", group_delete, methods=["GET", "POST"]),
        Route("/messages", messages),
        Route("/messages/{topic}/{broker}/{qid:int}/{offset:int}", message),
        Route("/ha", ha),
        Route("/acl", acl),
        Route("/traffic", traffic),
        Route("/api/traffic", traffic_json),
        Route("/dlq", dlq),
        Route("/dlq/{group}/resend", dlq_resend, methods=["POST"]),
    ]
    return Starlette(routes=routes, middleware=[Middleware(BaseHTTPMiddleware, dispatch=login_required(sessions))])


def browse(ap: oms.MessagingAccessPoint, topic: str, begin_ms: int | None, end_ms: int | None) -> list[dict[str, Any]]:
    """Up to BROWSE_LIMIT messages of every queue of ``topic`` stored in [begin, end) (reads only)."""
    rows: list[dict[str, Any]] = []
    with ap.create_pull_consumer(consumer_id=BROWSE_GROUP) as pc:
        for queue in chosen_queues(pc, topic, None, None):
            if len(rows) >= BROWSE_LIMIT:
                break
            rows.extend(read_queue(pc, queue, BROWSE_LIMIT - len(rows), begin_ms=begin_ms, end_ms=end_ms))
    for row in rows:
        row["text"] = row["body"].decode("utf-8", errors="replace")[:200]
    return rows
