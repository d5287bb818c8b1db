"""One remoting request over a fresh connection, answered: what tests of the remoting listeners share."""

from __future__ import annotations

import socket
import struct

from orbitmq.remoting.codec import RemotingCommand, decode, encode


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return data


def remoting_call(port: int, cmd: RemotingCommand, timeout: float = 10.0) -> RemotingCommand:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(encode(cmd))
        (total,) = struct.unpack(">i", _read(sock, 4))
        return decode(_read(sock, total))
