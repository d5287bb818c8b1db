"""A non-blocking frame connection driven by Celery's kombu hub (the worker's MainThread): the I/O around
``oms.client.frame_codec``, for the transport's hub fetchers (``hub.py``)."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable
from typing import Any

from oms.client.frame_codec import FrameCodec
from orbitmq.remoting.codec import FrameError, RemotingCommand

log = logging.getLogger("transports.celery")

READ_SIZE = 256 * 1024


class HubConnection:
    """One non-blocking TCP connection to a broker's frame listener, driven by the hub; a few calls in flight.

    Requests are a few hundred bytes and no more than a handful are unanswered, so a write goes whole into the socket
    buffer; the hub only ever watches the socket for reading (kombu's epoll poller cannot add write interest to an
    fd it reads), except while connecting."""

    def __init__(
        self,
        hub: Any,
        address: tuple[str, int],
        on_answer: Callable[[HubConnection, RemotingCommand], None],
        on_lost: Callable[[HubConnection, str], None],
        write_timeout_s: float,
    ) -> None:
        self.hub = hub
        self.address = address
        self.codec = FrameCodec()
        self._on_answer = on_answer
        self._on_lost = on_lost
        self._write_timeout_s = write_timeout_s
        host, port = address
        self._out = b""  # written once connected
        self._connected = False
        self.closed = False
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setblocking(False)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._fd = self._sock.fileno()
        err = self._sock.connect_ex(self.address)
        if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
            self._sock.close()
            self.closed = True
            raise ConnectionRefusedError(err, f"{host}:{port}: {errno.errorcode.get(err, err)}")
        hub.add_writer(self._fd, self._on_connected)

    def send(self, data: bytes) -> None:
        if not self._connected:
            self._out += data
            return
        try:
            sent = self._sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._lost(f"write failed: {exc!r}")
            return
        if sent < len(data):
            self._write_rest(data[sent:])

    def _write_rest(self, rest: bytes) -> None:
        """A write the socket did not take whole (never seen: a few small requests at a time): finish it blocking,
        bounded by the call's timeout, rather than watch the socket for writing."""
        try:
            self._sock.settimeout(self._write_timeout_s)
            self._sock.sendall(rest)
            self._sock.setblocking(False)
        except OSError as exc:
            self._lost(f"write failed: {exc!r}")

    def _on_connected(self, *_: Any) -> None:
        if self.closed:
            return
        err = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        self.hub.remove_writer(self._fd)
        if err:
            self._lost(f"cannot connect to {self.address[0]}:{self.address[1]}: {errno.errorcode.get(err, err)}")
            return
        self._connected = True
        self.hub.add_reader(self._fd, self._on_readable)
        out, self._out = self._out, b""
        if out:
            self.send(out)

    def _on_readable(self, *_: Any) -> None:
        if self.closed:
            return
        try:
            data = self._sock.recv(READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(f"read failed: {exc!r}")
            return
        if not data:
            self._lost("the broker closed the connection")
            return
        try:
            answers = self.codec.feed(data)
        except FrameError as exc:
            self._lost(f"the broker sent a malformed frame: {exc}")
            return
        for answer in answers:
            self._on_answer(self, answer)

    def cancel(self, opaques: list[int]) -> None:
        """Give up the calls ``opaques`` (the broker ends their long polls), then close."""
        if opaques and self._connected and not self.closed:
            try:
                self._sock.send(b"".join(self.codec.cancel(opaque) for opaque in opaques))
            except OSError as exc:  # closing anyway: the broker ends the call when the connection goes
                log.debug("cancel frame not sent: %r", exc)
        self.close()

    def _lost(self, reason: str) -> None:
        if not self.closed:
            self.close()
            self._on_lost(self, reason)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.hub.remove(self._fd)
        self._sock.close()
