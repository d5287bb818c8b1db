"""``mqadmin``: RocketMQ's admin command line (subcommand names and flags) over the ``oms`` resource manager.

Tables for people by default, ``--json`` for scripts; errors go to stderr with the status code, exit code 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TextIO

import oms
from oms.admin import models as m
from oms.admin.manager import ResourceManager
from oms.consumer.pull import PullConsumer, PullStatus
from oms.errors import OMSException, OMSRuntimeException
from oms.message import BytesMessage
from oms.queue import ANY_QUEUE, MessageQueue
from oms.url import NAMESRV_ENV
from orbitmq.errors import Code

EXIT_OK = 0
EXIT_ERROR = 1  # the command reached the servers (or tried to) and failed
EXIT_USAGE = 2  # argparse's code for bad command lines
ROCKETMQ_TIME_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"  # RocketMQ's yyyy-MM-dd#HH:mm:ss:SSS
# RocketMQ defaults -g to its TOOLS_CONSUMER group, which the v2 protocol refuses to clients as a system group
TOOLS_CONSUMER_GROUP = "mqadmin-tools-consumer"
CONSUME_DEFAULT_COUNT = 128  # RocketMQ's consumeMessage -c default
CONSUME_PULL_BATCH = 32


class UsageError(Exception):
    """A command line that cannot run (reported like argparse's errors, exit code 2)."""


# -- value parsing ----------------------------------------------------------------------------------------------


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "y", "on"):
        return True
    if value in ("false", "0", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_timestamp(text: str, now_ms: int | None = None) -> int:
    """``now``, milliseconds since the epoch, RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS`` or ISO 8601 (local time)."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000) if now_ms is None else now_ms
    if value.isdigit():
        return int(value)
    for parse in (lambda v: datetime.strptime(v, ROCKETMQ_TIME_FORMAT), datetime.fromisoformat):
        try:
            return int(parse(value).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(
        f"timestamp {text!r}: use now, milliseconds since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS"
    )


def parse_attributes(text: str) -> dict[str, str | None]:
    """RocketMQ's ``+key=value,-key`` topic attributes: ``+`` (or nothing) sets, ``-`` removes (value None)."""
    out: dict[str, str | None] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        if item.startswith("-"):
            out[item[1:]] = None
            continue
        key, sep, value = item.lstrip("+").partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"attribute {item!r}: expected +key=value or -key")
        out[key] = value
    return out


def parse_options(text: str) -> dict[str, str]:
    """``key=value,key=value`` (allocation strategy options)."""
    out: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"option {item!r}: expected key=value")
        out[key] = value
    return out


# -- output -----------------------------------------------------------------------------------------------------


def human_time(ms: int) -> str:
    if ms <= 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO) -> None:
    """Columns padded to their widest cell, headers prefixed with ``#`` as mqadmin prints them."""
    cells = [[f"#{h}" for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def body_text(body: bytes, limit: int = 1024) -> str:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(body)} bytes, not UTF-8; use --json for base64>"
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def print_message(view: m.MessageView, out: TextIO) -> None:
    fields = [
        ("OffsetID", view.msg_id),
        ("Topic", view.topic),
        ("Tags", view.tags or ""),
        ("Keys", " ".join(view.keys)),
        ("Unique Key", view.unique_id),
        ("Broker Name", view.broker_name),
        ("Queue ID", view.queue_id),
        ("Queue Offset", view.queue_offset),
        ("CommitLog Offset", view.commitlog_offset),
        ("Reconsume Times", view.reconsume_times),
        ("Born Timestamp", human_time(view.born_timestamp_ms)),
        ("Store Timestamp", human_time(view.store_timestamp_ms)),
        ("Born Host", view.born_host),
        ("Store Host", view.store_host),
        ("Store Size", view.store_size),
        ("Properties", json.dumps(dict(view.properties), sort_keys=True)),
        ("Body", body_text(view.body)),
    ]
    for name, value in fields:
        out.write(f"{name + ':':<18}{value}\n")


# -- commands ---------------------------------------------------------------------------------------------------

Handler = Callable[[ResourceManager, argparse.Namespace, TextIO], Any]


def cmd_cluster_list(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    brokers = [b for b in rm.cluster_list(runtime=True) if not args.clusterName or b.cluster == args.clusterName]
    if args.json:
        return brokers
    rows = [
        (
            b.cluster,
            b.broker_name,
            b.broker_id,
            b.addr,
            b.runtime.get("putMessageTotal", "-"),
            b.runtime.get("getMessageTotal", "-"),
            b.runtime.get("topicCount", "-"),
            b.runtime.get("flushDiskType", b.runtime.get("error", "-")),
        )
        for b in brokers
    ]
    table(["Cluster Name", "Broker Name", "BID", "Addr", "Put Total", "Get Total", "Topics", "Flush"], rows, out)
    return None


def cmd_topic_list(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    topics = rm.list_topics(cluster=args.clusterName)
    if args.json:
        return topics
    for topic in topics:
        out.write(topic + "\n")
    return None


def cmd_update_topic(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    attributes = parse_attributes(args.attributes) if args.attributes else None
    infos = rm.update_topic(
        args.topic,
        read_queue_nums=args.readQueueNums,
        write_queue_nums=args.writeQueueNums,
        perm=args.perm,
        order=args.order,
        attributes=attributes,
        cluster=args.clusterName,
        broker=args.brokerAddr,
        create=True,  # RocketMQ's updateTopic creates or updates
    )
    if args.json:
        return infos
    for info in infos:
        out.write(f"create topic to {info.broker_name} success.\n")
    _topic_table(infos, out)
    return None


def _topic_table(infos: Sequence[m.TopicInfo], out: TextIO) -> None:
    rows = [
        (
            i.topic,
            i.broker_name,
            i.read_queue_nums,
            i.write_queue_nums,
            i.perm_string,
            i.message_type,
            ",".join(f"{k}={v}" for k, v in sorted(i.attributes.items())) or "-",
        )
        for i in infos
    ]
    table(["Topic", "Broker Name", "Read Queues", "Write Queues", "Perm", "Message Type", "Attributes"], rows, out)


def cmd_delete_topic(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    brokers = rm.delete_topic(args.topic, cluster=args.clusterName, broker=args.brokerAddr)
    if args.json:
        return {"topic": args.topic, "brokers": brokers}
    for name in brokers:
        out.write(f"delete topic [{args.topic}] from broker {name} success.\n")
    return None


def cmd_topic_route(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    route = rm.topic_route(args.topic)
    if args.json:
        return route
    table(
        ["Broker Name", "Cluster", "Broker Addrs"],
        [
            (b.broker_name, b.cluster, ", ".join(f"{k}:{v}" for k, v in sorted(b.addrs.items())))
            for b in route.broker_datas
        ],
        out,
    )
    out.write("\n")
    table(
        ["Broker Name", "Read Queues", "Write Queues", "Perm", "Message Type"],
        [
            (q.broker_name, q.read_queue_nums, q.write_queue_nums, m.perm_string(q.perm), q.message_type)
            for q in route.queue_datas
        ],
        out,
    )
    return None


def cmd_topic_status(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    status = rm.topic_status(args.topic)
    if args.json:
        return status
    rows = [
        (q.broker_name, q.queue_id, q.min_offset, q.max_offset, human_time(q.last_update_timestamp_ms))
        for q in status.queues
    ]
    table(["Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"], rows, out)
    return None


def cmd_update_sub_group(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    infos = rm.update_group(
        args.groupName,
        retry_max_times=args.retryMaxTimes,
        orderly=args.consumeMessageOrderly,
        broadcast=args.consumeBroadcastEnable,
        consume_enable=args.consumeEnable,
        retry_queue_nums=args.retryQueueNums,
        allocate_strategy=args.allocateStrategy,
        allocate_options=parse_options(args.allocateOptions) if args.allocateOptions is not None else None,
        cluster=args.clusterName,
        broker=args.brokerAddr,
        create=True,
    )
    if args.json:
        return infos
    for info in infos:
        out.write(f"create subscription group to {info.broker_name} success.\n")
    _group_table(infos, out)
    return None


def _group_table(infos: Sequence[m.GroupInfo], out: TextIO) -> None:
    rows = [
        (
            g.group,
            g.broker_name,
            g.consume_enable,
            g.retry_max_times,
            g.orderly,
            g.broadcast,
            g.allocate_strategy or "-",
            ",".join(f"{k}={v}" for k, v in sorted(g.allocate_options.items())) or "-",
        )
        for g in infos
    ]
    headers = ["Group", "Broker Name", "Consume", "Retry Max", "Orderly", "Broadcast", "Allocate", "Options"]
    table(headers, rows, out)


def cmd_delete_sub_group(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    brokers = rm.delete_group(args.groupName, cluster=args.clusterName, broker=args.brokerAddr)
    if args.json:
        return {"group": args.groupName, "brokers": brokers}
    for name in brokers:
        out.write(f"delete subscription group [{args.groupName}] from broker {name} success.\n")
    return None


def cmd_group_list(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    infos = rm.list_groups(cluster=args.clusterName, broker=args.brokerAddr)
    if args.json:
        return infos
    _group_table(infos, out)
    return None


def cmd_consumer_progress(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    progress = rm.consumer_progress(args.groupName, args.topic)
    if args.json:
        return progress
    rows = [(q.topic, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset, q.lag) for q in progress.queues]
    table(["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff"], rows, out)
    out.write(f"\nDiff Total: {progress.total_lag}\n")
    return None


def cmd_reset_offset_by_time(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    resets = rm.reset_offset_by_time(args.group, args.topic, args.timestamp)
    if args.json:
        return {"group": args.group, "topic": args.topic, "timestamp_ms": args.timestamp, "offsets": resets}
    out.write(f"reset offsets of group {args.group} on topic {args.topic} to {human_time(args.timestamp)}\n")
    table(["Broker Name", "QID", "Offset"], [(r.broker_name, r.queue_id, r.offset) for r in resets], out)
    return None


def cmd_query_msg_by_id(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    views: list[m.MessageView] = []
    for msg_id in (i.strip() for i in args.msgId.split(",")):
        if msg_id:
            views.extend(rm.query_message_by_id(msg_id, topic=args.topic))
    if args.json:
        return views
    for n, view in enumerate(views):
        if n:
            out.write("\n")
        print_message(view, out)
    return None


def cmd_query_msg_by_key(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    views = rm.query_message_by_key(
        args.topic, args.msgKey, max_num=args.maxNum, begin_ms=args.beginTimestamp, end_ms=args.endTimestamp
    )
    if args.json:
        return views
    rows = [
        (v.msg_id, v.unique_id, v.broker_name, v.queue_id, v.queue_offset, human_time(v.store_timestamp_ms))
        for v in views
    ]
    table(["Message ID", "Unique Key", "Broker Name", "QID", "Offset", "Store Time"], rows, out)
    return None


def cmd_query_msg_by_offset(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    view = rm.query_message_by_offset(args.topic, args.queueId, args.offset, broker=args.brokerName)
    if args.json:
        return view
    print_message(view, out)
    return None


def cmd_resend_dead_letter(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    if not args.msgId and args.offset is None:
        raise UsageError("resendDeadLetter needs -i msgId, or -o offset (with -b brokerName on a multi-broker cluster)")
    result = rm.resend_dead_letter(
        args.groupName, args.msgId, broker=args.brokerName, offset=args.offset, queue_id=args.queueId
    )
    if args.json:
        return result
    letter = result.dead_letter
    out.write(
        f"resent {letter.unique_id or letter.msg_id} from {letter.topic} ({letter.broker_name} "
        f"queue {letter.queue_id} offset {letter.queue_offset}) to topic {result.topic}: "
        f"message id {result.message_id}, broker {result.broker_name}, offset {result.queue_offset}\n"
        f"the dead letter stays in {letter.topic}\n"
    )
    return None


def _queue_text(queue_id: int) -> str:
    return "-" if queue_id == ANY_QUEUE else str(queue_id)


def cmd_send_message(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    """RocketMQ's ``sendMessage``: one message, optionally to ``-b`` broker / ``-i`` queue."""
    message = BytesMessage(args.body, args.topic, tags=args.tags, keys=args.keys.split(",") if args.keys else None)
    selector = None
    if args.brokerName is not None or args.queueId is not None:
        # v2 SendMessage has no queue field for plain messages: the broker picks the queue unless the message
        # carries a message group it hashes onto a queue, which only FIFO (or MIXED) topics accept. The producer
        # raises MESSAGE_PROPERTY_CONFLICT_WITH_TYPE for other topics, with that explanation.
        selector = _queue_selector(args.topic, args.brokerName, args.queueId)
    with args.access_point.create_producer(operation_timeout=args.timeout) as producer:
        result = producer.send(message, selector=selector)
    if args.json:
        return result
    table(
        ["Broker Name", "QID", "Queue Offset", "MsgId", "Send Result"],
        [
            (
                result.queue.broker_name,
                _queue_text(result.queue.queue_id),
                result.queue_offset,
                result.message_id,
                result.status.value,
            )
        ],
        out,
    )
    return None


def _queue_selector(
    topic: str, broker: str | None, queue_id: int | None
) -> Callable[[Sequence[MessageQueue], BytesMessage, Any], MessageQueue]:
    def select(queues: Sequence[MessageQueue], _message: BytesMessage, _arg: Any) -> MessageQueue:
        matching = [
            q
            for q in queues
            if (broker is None or q.broker_name == broker) and (queue_id is None or q.queue_id == queue_id)
        ]
        if not matching:
            raise OMSRuntimeException(
                Code.BAD_REQUEST,
                f"no writable queue {_where(broker, queue_id)} of topic {topic!r}; writable: "
                + ", ".join(f"{q.broker_name}:{q.queue_id}" for q in sorted(queues)),
            )
        return matching[0]

    return select


def _where(broker: str | None, queue_id: int | None) -> str:
    parts = [
        f"on broker {broker!r}" if broker is not None else "",
        f"with id {queue_id}" if queue_id is not None else "",
    ]
    return " ".join(p for p in parts if p)


def _consume_queues(pc: PullConsumer, args: argparse.Namespace) -> list[MessageQueue]:
    queues = sorted(pc.queues(args.topic))
    chosen = [
        q
        for q in queues
        if (args.brokerName is None or q.broker_name == args.brokerName)
        and (args.queueId is None or q.queue_id == args.queueId)
    ]
    if not chosen:
        raise OMSRuntimeException(
            Code.BAD_REQUEST,
            f"no readable queue {_where(args.brokerName, args.queueId)} of topic {args.topic!r}; readable: "
            + ", ".join(f"{q.broker_name}:{q.queue_id}" for q in queues),
        )
    return chosen


def _message_row(message: BytesMessage, queue: MessageQueue) -> dict[str, Any]:
    return {
        "msg_id": message.message_id,
        "topic": queue.topic,
        "broker_name": queue.broker_name,
        "queue_id": queue.queue_id,
        "queue_offset": message.queue_offset,
        "tags": message.tags,
        "keys": message.keys,
        "born_timestamp_ms": message.born_timestamp,
        "store_timestamp_ms": message.store_timestamp,
        "body": message.body,
    }


def cmd_consume_message(rm: ResourceManager, args: argparse.Namespace, out: TextIO) -> Any:
    """RocketMQ's ``consumeMessage``: read (never commit) up to ``-c`` messages of a topic or one queue, from
    ``-o`` offset or the ``-s`` timestamp (default: each queue's first message) up to the ``-e`` timestamp."""
    if args.offset is not None and args.queueId is None:
        raise UsageError("consumeMessage -o offset needs -i queueId (and -b brokerName on a multi-broker cluster)")
    if args.count <= 0:
        raise UsageError(f"-c must be positive, got {args.count}")
    rows: list[dict[str, Any]] = []
    with args.access_point.create_pull_consumer(consumer_id=args.group, operation_timeout=args.timeout) as pc:
        queues = _consume_queues(pc, args)
        if args.offset is not None and len(queues) > 1:
            raise UsageError("-o offset names one queue: give -b brokerName as well (the topic has several brokers)")
        for queue in queues:
            if len(rows) >= args.count:
                break
            if args.offset is not None:
                offset = args.offset
                low, high = pc.earliest_offset(queue), pc.latest_offset(queue)
                if not low <= offset <= high:
                    raise OMSRuntimeException(
                        Code.ILLEGAL_OFFSET, f"offset {offset} is outside {queue}: it holds offsets {low} to {high - 1}"
                    )
            elif args.beginTimestamp is not None:
                offset = pc.offset_for_time(queue, args.beginTimestamp)
            else:
                offset = pc.earliest_offset(queue)
            end = pc.offset_for_time(queue, args.endTimestamp) if args.endTimestamp is not None else None
            end = pc.latest_offset(queue) if end is None else end
            while offset < end and len(rows) < args.count:
                result = pc.pull(queue, offset, min(CONSUME_PULL_BATCH, end - offset, args.count - len(rows)))
                if result.status is PullStatus.OFFSET_ILLEGAL:
                    raise OMSRuntimeException(
                        Code.ILLEGAL_OFFSET,
                        f"offset {offset} is outside {queue} (min {result.min_offset}, max {result.max_offset})",
                    )
                rows.extend(_message_row(msg, queue) for msg in result.messages if (msg.queue_offset or 0) < end)
                if result.next_offset <= offset:  # nothing more to read before the end
                    break
                offset = result.next_offset
    rows = rows[: args.count]
    if args.json:
        return rows
    table(
        ["MsgId", "Broker Name", "QID", "Offset", "Tags", "Keys", "Body"],
        [
            (
                r["msg_id"],
                r["broker_name"],
                r["queue_id"],
                r["queue_offset"],
                r["tags"] or "-",
                ",".join(r["keys"]) or "-",
                body_text(r["body"], 200).replace("\n", "\\n"),
            )
            for r in rows
        ],
        out,
    )
    out.write(f"\n{len(rows)} message(s)\n")
    return None


# -- parser -----------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mqadmin",
        description="OrbitMQ admin tool (RocketMQ mqadmin subcommands and flags).",
        epilog=f"Name servers come from -n or {NAMESRV_ENV}; --brokerAddr talks to brokers without a name server.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namesrvAddr", help=f"name server host:port[;host:port] (default: ${NAMESRV_ENV})")
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    common.add_argument("--timeout", type=int, default=10_000, metavar="MS", help="per-call timeout (default 10000)")
    common.add_argument("--accessKey", help="ACL access key")
    common.add_argument("--secretKey", help="ACL secret key")

    def command(name: str, handler: Handler, help_text: str, *, direct: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_text, description=help_text)
        p.set_defaults(handler=handler)
        if direct:  # where RocketMQ has no -b of another meaning, -b is the broker address as well
            p.add_argument("-b", "--brokerAddr", help="broker host:port (used directly when there is no name server)")
        else:
            p.add_argument("--brokerAddr", help="broker host:port to talk to directly (no name server)")
        return p

    p = command("clusterList", cmd_cluster_list, "List brokers of every cluster, with runtime totals.")
    p.add_argument("-c", "--clusterName")

    p = command("topicList", cmd_topic_list, "List topic names.")
    p.add_argument("-c", "--clusterName", help="only this cluster's brokers' topics")

    p = command("updateTopic", cmd_update_topic, "Create or update a topic on a cluster or one broker.")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--clusterName", help="every master broker of this cluster")
    p.add_argument("-r", "--readQueueNums", type=int, help="default 8 for a new topic")
    p.add_argument("-w", "--writeQueueNums", type=int, help="default 8 for a new topic")
    p.add_argument("-p", "--perm", type=int, help="2 write, 4 read, 6 read-write (default 6)")
    p.add_argument("-o", "--order", type=parse_bool, help="true/false")
    p.add_argument(
        "-a",
        "--attributes",
        help="+message.type=FIFO,+queue.type=BatchCQ,+key=value,-key (use --attributes=-key); queue.type "
        "(SimpleCQ/BatchCQ) is fixed once the topic exists",
    )

    p = command("deleteTopic", cmd_delete_topic, "Delete a topic (config, offsets, messages).")
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-c", "--clusterName")

    p = command("topicRoute", cmd_topic_route, "Show a topic's route: brokers and queues.")
    p.add_argument("-t", "--topic", required=True)

    p = command("topicStatus", cmd_topic_status, "Show min/max offsets and last update time of every queue.")
    p.add_argument("-t", "--topic", required=True)

    p = command("updateSubGroup", cmd_update_sub_group, "Create or update a subscription (consumer) group.")
    p.add_argument("-g", "--groupName", required=True)
    p.add_argument("-c", "--clusterName")
    p.add_argument("-s", "--consumeEnable", type=parse_bool)
    p.add_argument("-d", "--consumeBroadcastEnable", type=parse_bool)
    p.add_argument("-o", "--consumeMessageOrderly", type=parse_bool)
    p.add_argument("-q", "--retryQueueNums", type=int)
    p.add_argument("-r", "--retryMaxTimes", type=int, help="default 16 for a new group")
    p.add_argument("--allocateStrategy", help="QueryAssignment strategy plugin name ('' = broker default)")
    p.add_argument("--allocateOptions", help="strategy options key=value,key=value")

    p = command("deleteSubGroup", cmd_delete_sub_group, "Delete a subscription group and its offsets.")
    p.add_argument("-g", "--groupName", required=True)
    p.add_argument("-c", "--clusterName")

    p = command("groupList", cmd_group_list, "List subscription groups per broker.")
    p.add_argument("-c", "--clusterName")

    p = command("consumerProgress", cmd_consumer_progress, "Broker offset, consumer offset and lag per queue.")
    p.add_argument("-g", "--groupName", required=True)
    p.add_argument("-t", "--topic", help="one topic (default: every topic the group committed)")

    p = command("resetOffsetByTime", cmd_reset_offset_by_time, "Reset a group's offsets to a point in time.")
    p.add_argument("-g", "--group", required=True)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-s", "--timestamp", required=True, type=parse_timestamp, help="now, ms, or yyyy-MM-dd#HH:mm:ss:SSS")

    p = command("queryMsgById", cmd_query_msg_by_id, "Query messages by offset message id (or unique id + -t).")
    p.add_argument("-i", "--msgId", required=True, help="one id or several, comma-separated")
    p.add_argument("-t", "--topic", help="needed for a producer's (unique) message id")

    p = command("queryMsgByKey", cmd_query_msg_by_key, "Query messages by key.", direct=False)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-k", "--msgKey", required=True)
    p.add_argument("-b", "--beginTimestamp", type=parse_timestamp, default=0)
    p.add_argument("-e", "--endTimestamp", type=parse_timestamp, default=None)
    p.add_argument("-c", "--maxNum", type=int, default=64)

    p = command("queryMsgByOffset", cmd_query_msg_by_offset, "Query the message at a queue offset.", direct=False)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-b", "--brokerName", help="needed when several brokers serve the topic")
    p.add_argument("-i", "--queueId", type=int, required=True)
    p.add_argument("-o", "--offset", type=int, required=True)

    p = command(
        "resendDeadLetter",
        cmd_resend_dead_letter,
        "Send a dead letter of a group again to its original topic (the copy in the DLQ stays).",
        direct=False,
    )
    p.add_argument("-g", "--groupName", required=True)
    p.add_argument("-i", "--msgId", help="the dead letter's message id (unique or offset id)")
    p.add_argument("-b", "--brokerName", help="the broker holding the dead letter (with -o)")
    p.add_argument("-o", "--offset", type=int, help="the dead letter's offset in the DLQ queue")
    p.add_argument("-q", "--queueId", type=int, default=0, help="DLQ queue id (default 0)")

    p = command("sendMessage", cmd_send_message, "Send one message (to a broker/queue on FIFO topics).", direct=False)
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-p", "--body", required=True, help="message body (UTF-8)")
    p.add_argument("-k", "--keys", help="message keys, comma-separated")
    p.add_argument("-c", "--tags")
    p.add_argument("-b", "--brokerName", help="send to this broker (FIFO/MIXED topics: see docs/oms.md)")
    p.add_argument("-i", "--queueId", type=int, help="send to this queue id (FIFO/MIXED topics)")

    p = command(
        "consumeMessage",
        cmd_consume_message,
        "Print messages of a topic or queue (reads only: commits no offset).",
        direct=False,
    )
    p.add_argument("-t", "--topic", required=True)
    p.add_argument("-g", "--group", default=TOOLS_CONSUMER_GROUP, help=f"default {TOOLS_CONSUMER_GROUP}")
    p.add_argument("-b", "--brokerName")
    p.add_argument("-i", "--queueId", type=int)
    p.add_argument("-o", "--offset", type=int, help="start offset in the -i queue")
    p.add_argument("-c", "--count", type=int, default=CONSUME_DEFAULT_COUNT, help="at most this many messages")
    p.add_argument("-s", "--beginTimestamp", type=parse_timestamp, help="start at the first message stored since")
    p.add_argument("-e", "--endTimestamp", type=parse_timestamp, help="stop before messages stored after")
    return parser


def access_point_url(args: argparse.Namespace, environ: dict[str, str] | os._Environ[str]) -> str:
    """Name servers from -n, else brokers from --brokerAddr (or -b), else NAMESRV_ADDR."""
    hosts = args.namesrvAddr or args.brokerAddr or environ.get(NAMESRV_ENV, "").strip()
    if not hosts:
        raise UsageError(f"no name server: give -n host:port, set {NAMESRV_ENV}, or give --brokerAddr host:port")
    return f"oms:rocketmq://{hosts}/"


def run(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run one command; returns the exit code (0 ok, 1 failed, 2 bad command line)."""
    out, err = out or sys.stdout, err or sys.stderr
    parser = build_parser()
    try:
        # argparse prints usage errors and --help itself: to the streams this run was given
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed its message (or the help) already
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        url = access_point_url(args, os.environ)
        with (
            oms.get_messaging_access_point(
                url, operation_timeout=args.timeout, access_key=args.accessKey, secret_key=args.secretKey
            ) as ap,
            ap.resource_manager() as rm,
        ):
            args.access_point = ap  # sendMessage/consumeMessage use a producer or pull consumer of their own
            result = args.handler(rm, args, out)
    except UsageError as exc:
        parser.print_usage(err)
        err.write(f"mqadmin {args.command}: error: {exc}\n")
        return EXIT_USAGE
    except OMSException as exc:
        err.write(f"mqadmin {args.command}: {exc}\n")
        return EXIT_ERROR
    except ValueError as exc:  # e.g. only one of accessKey/secretKey
        err.write(f"mqadmin {args.command}: {exc}\n")
        return EXIT_ERROR
    if args.json:
        out.write(json.dumps(m.to_jsonable(result), indent=2, sort_keys=True) + "\n")
    out.flush()
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
