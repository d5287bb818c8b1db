"""Frame calls made on the calling thread itself, over pooled blocking sockets: for a thread that would otherwise
hand its call to the access point's loop and block until the loop hands the answer back.

A call through the loop wakes the loop thread (a self-pipe write), which writes the request and later wakes the
caller (a futex); each wake-up of an idle thread costs tens of microseconds here. A direct call writes the request
and reads the answer itself: only the broker and the caller are woken (docs/oms.md, "Direct sends").
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Sequence

import grpc

from oms.client.frame_codec import FrameCodec, FrameRpcError, answer_body
from oms.client.frames import CONNECT_TIMEOUT_S
from orbitmq.remoting.codec import FrameError

Address = tuple[str, int]

MAX_IDLE_PER_ADDRESS = 8  # connections kept for reuse per broker; more callers at once each open their own
RECV_BYTES = 64 * 1024  # answers to sends are small (a SendBatch answer of 1,024 offsets is under 10 KB)


Body = bytes | Sequence[bytes]  # a request's serialized body, whole or in pieces to be written back to back


def send_pieces(sock: socket.socket, pieces: Sequence[bytes], deadline: float) -> None:
    """``sendall`` of the pieces joined, without joining them: one ``sendmsg`` per kernel write (a request of
    several MB is written in a few), each resumed where the kernel stopped. ``TimeoutError`` past ``deadline``."""
    views = [memoryview(p) for p in pieces if p]
    while views:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        sock.settimeout(remaining)
        sent = sock.sendmsg(views)
        while sent:
            first = views[0]
            if sent < len(first):
                views[0] = first[sent:]
                break
            sent -= len(first)
            del views[0]


class DirectConnection:
    """One blocking socket to a broker's frame listener, used by one thread at a time (a pool lends it out)."""

    __slots__ = ("_codec", "_sock", "address")

    def __init__(self, address: Address, timeout: float) -> None:
        self.address = address
        self._sock = socket.create_connection(address, timeout=min(timeout, CONNECT_TIMEOUT_S))
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._codec = FrameCodec()

    def call(self, method: str, body: Body, metadata: Sequence[tuple[str, str]], timeout: float) -> bytes:
        """The answer's body; ``FrameRpcError`` for the status a failed call answered (the connection stays good),
        ``TimeoutError``/``OSError``/``FrameError`` when the connection failed (it must then be closed). ``body``
        may come in pieces (``batch_wire``): they are written after the frame's head as they are."""
        deadline = time.monotonic() + timeout
        sock = self._sock
        if isinstance(body, bytes):
            opaque, frame = self._codec.request(method, body, metadata, timeout)  # over the frame limit: raises here
            sock.settimeout(timeout)
            sock.sendall(frame)
        else:
            opaque, head = self._codec.request_head(method, sum(map(len, body)), metadata, timeout)
            send_pieces(sock, [head, *body], deadline)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            sock.settimeout(remaining)
            data = sock.recv(RECV_BYTES)
            if not data:
                raise ConnectionResetError("the broker closed the connection")
            for answer in self._codec.feed(data):
                # one call at a time, and a connection whose call failed is closed: any other opaque is a
                # broker's mistake, not a late answer
                if answer.opaque != opaque:
                    raise FrameError(f"an answer to call {answer.opaque} arrived during call {opaque}")
                return answer_body(answer, method)

    def stale(self) -> bool:
        """Whether this idle connection is unusable: the broker closed it (a restart) or sent what nobody asked
        for. A peek without waiting, so a restart costs no failed attempt (and no fault mark on the broker)."""
        try:
            self._sock.settimeout(0)
            self._sock.recv(1, socket.MSG_PEEK)  # data or EOF: either way not ours to use
            return True
        except BlockingIOError:
            return False
        except OSError:
            return True

    def close(self) -> None:
        self._sock.close()


class DirectPool:
    """Thread-safe: idle connections per frame address, the most recently used lent first. A call that fails on
    its connection closes it; ``close()`` closes the idle ones (a call in progress ends with its socket closed)."""

    def __init__(self, max_idle: int = MAX_IDLE_PER_ADDRESS) -> None:
        self.max_idle = max_idle
        self._idle: dict[Address, list[DirectConnection]] = {}
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self.closed = False

    def call(
        self, address: Address, method: str, body: Body, metadata: Sequence[tuple[str, str]], timeout: float
    ) -> bytes:
        """``method`` on the broker at ``address``; failures raise ``FrameRpcError`` with the status the gRPC
        transport would give (UNAVAILABLE: the connection failed; DEADLINE_EXCEEDED: no answer in time)."""
        conn = self._borrow(address, timeout)
        where = f"{address[0]}:{address[1]}"
        try:
            answer = conn.call(method, body, metadata, timeout)
        except FrameRpcError:
            self._give_back(conn)  # the broker answered: the connection is in step
            raise
        except TimeoutError:
            conn.close()
            raise FrameRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, f"{method}: deadline exceeded") from None
        except (OSError, FrameError) as exc:
            conn.close()
            raise FrameRpcError(grpc.StatusCode.UNAVAILABLE, f"{where}: connection lost: {exc!r}") from None
        except BaseException:
            conn.close()  # interrupted mid-call (KeyboardInterrupt): its answer may still come on this socket
            raise
        self._give_back(conn)
        return answer

    def _borrow(self, address: Address, timeout: float) -> DirectConnection:
        with self._lock:
            if self.closed:
                raise FrameRpcError(grpc.StatusCode.UNAVAILABLE, "the access point's connections are closed")
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not this process's to use
                self._pid, stale = os.getpid(), self._idle
                self._idle = {}
                for conns in stale.values():
                    for conn in conns:
                        conn.close()
            idle = self._idle.get(address)
            while idle:
                conn = idle.pop()
                if not conn.stale():
                    return conn
                conn.close()
        try:
            return DirectConnection(address, timeout)
        except OSError as exc:
            raise FrameRpcError(
                grpc.StatusCode.UNAVAILABLE, f"cannot connect to {address[0]}:{address[1]}: {exc}"
            ) from None

    def _give_back(self, conn: DirectConnection) -> None:
        with self._lock:
            if not self.closed and self._pid == os.getpid():
                idle = self._idle.setdefault(conn.address, [])
                if len(idle) < self.max_idle:
                    idle.append(conn)
                    return
        conn.close()

    def forget(self, address: Address) -> None:
        """Close the idle connections to ``address`` (its broker went away; new calls connect afresh)."""
        with self._lock:
            idle = self._idle.pop(address, [])
        for conn in idle:
            conn.close()

    def close(self) -> None:
        with self._lock:
            self.closed = True
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()
