"""A raw-socket remoting client for tests: requests with their answers matched by opaque, and the broker's own
requests (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) kept aside until a test asks for them."""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import socket
import struct
import time

from orbitmq.remoting.codec import RemotingCommand, decode, encode
from orbitmq.remoting.codes import RPC_ONEWAY, RequestCode


class RawClient:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.timeout = timeout
        self._opaque = itertools.count(1)
        self.requests: list[RemotingCommand] = []  # the broker's requests not yet taken

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, cmd: RemotingCommand) -> RemotingCommand:
        cmd.opaque = next(self._opaque)
        self.sock.sendall(encode(cmd))
        while True:
            frame = self._frame(self.timeout)
            assert frame is not None, f"no answer to request code {cmd.code} within {self.timeout}s"
            if frame.is_response and frame.opaque == cmd.opaque:
                return frame
            if not frame.is_response:
                self.requests.append(frame)

    def oneway(self, cmd: RemotingCommand) -> None:
        cmd.opaque = next(self._opaque)
        cmd.flag |= RPC_ONEWAY
        self.sock.sendall(encode(cmd))

    def next_request(self, code: int, timeout: float) -> RemotingCommand | None:
        """The next request of ``code`` the broker sent on this connection, waiting up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            for i, r in enumerate(self.requests):
                if r.code == code:
                    return self.requests.pop(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            frame = self._frame(remaining)
            if frame is not None and not frame.is_response:
                self.requests.append(frame)

    def heartbeat(self, client_id: str, *, consumer_groups: dict[str, str] | None = None,
                  producer_groups: tuple[str, ...] = ()) -> RemotingCommand:  # fmt: skip
        """HEART_BEAT as a 4.x client sends it: consumer groups (group -> topic subscribed with *) and producers."""
        body = {
            "clientID": client_id,
            "consumerDataSet": [
                {
                    "groupName": g,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "subscriptionDataSet": [{"topic": t, "subString": "*", "tagsSet": [], "codeSet": []}],
                }
                for g, t in (consumer_groups or {}).items()
            ],
            "producerDataSet": [{"groupName": g} for g in producer_groups],
        }
        return self.call(RemotingCommand(RequestCode.HEART_BEAT, body=json.dumps(body).encode()))

    def _frame(self, timeout: float) -> RemotingCommand | None:
        self.sock.settimeout(timeout)
        try:
            head = self._read(4)
        except TimeoutError:
            return None
        finally:
            self.sock.settimeout(self.timeout)
        (total,) = struct.unpack(">i", head)
        return decode(self._read(total))

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the server")
            data += chunk
        return data


def sign(cmd: RemotingCommand, access_key: str, secret_key: str) -> RemotingCommand:
    """RocketMQ 4's AclClientRPCHook: AccessKey joins the ext fields, then HmacSHA1 (base64) over the values sorted
    by name, then the body, goes into Signature."""
    cmd.ext_fields["AccessKey"] = access_key
    content = "".join(v for k, v in sorted(cmd.ext_fields.items()) if k != "Signature").encode() + cmd.body
    digest = hmac.new(secret_key.encode(), content, hashlib.sha1).digest()
    cmd.ext_fields["Signature"] = base64.b64encode(digest).decode()
    return cmd


def properties(**props: str) -> str:
    """RocketMQ's properties string: name \\x01 value \\x02."""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items())


def first_message(body: bytes) -> tuple[int, int, bytes, str, str]:
    """(queue offset, sys flag, body, topic, properties) of the first message in a MessageDecoder-layout body."""
    queue_offset, _phys, sys_flag = struct.unpack_from(">qqi", body, 20)
    pos = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8
    (body_len,) = struct.unpack_from(">i", body, pos)
    msg = body[pos + 4 : pos + 4 + body_len]
    pos += 4 + body_len
    topic_len = body[pos]
    topic = body[pos + 1 : pos + 1 + topic_len].decode()
    pos += 1 + topic_len
    (props_len,) = struct.unpack_from(">h", body, pos)
    props = body[pos + 2 : pos + 2 + props_len].decode()
    return queue_offset, sys_flag, msg, topic, props


def rocketmq_batch(bodies: list[bytes], properties: str) -> bytes:
    """RocketMQ 4's MessageDecoder.encodeMessages: total, magic 0, body CRC 0 (none), flag, body, properties."""
    out = b""
    props = properties.encode()
    for body in bodies:
        total = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
        out += struct.pack(">iiiii", total, 0, 0, 0, len(body)) + body + struct.pack(">h", len(props)) + props
    return out
