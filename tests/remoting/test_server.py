"""The remoting server's own limits, on a real socket: a client that sends requests but never reads the answers
is cut off once an answer has waited for it past the limit, and the broker's tasks for it end."""

from __future__ import annotations

import asyncio
import socket
import time

from orbitmq.remoting.codec import RemotingCommand, encode
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.server import RemotingServer

ANSWER_BYTES = 8 << 20  # a few answers fill both sockets' buffers


async def big_answer(cmd: RemotingCommand, peer: str) -> RemotingCommand:
    answer = cmd.response(ResponseCode.SUCCESS)
    answer.body = b"a" * ANSWER_BYTES
    return answer


def test_a_client_that_never_reads_its_answers_is_cut_off() -> None:
    async def scenario() -> None:
        server = RemotingServer(big_answer, "test", answer_drain_timeout_s=0.5)
        port = await server.start("127.0.0.1", 0)
        client = socket.create_connection(("127.0.0.1", port))
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        try:
            for opaque in range(1, 9):
                client.sendall(encode(RemotingCommand(code=10, opaque=opaque)))
            started = time.monotonic()
            while not server._channels and time.monotonic() - started < 5:  # the server took the connection
                await asyncio.sleep(0.01)
            assert server._channels and server._connections
            while server._connections and time.monotonic() - started < 10:
                await asyncio.sleep(0.05)
            assert not server._connections, "the connection of a client that never reads is still open"
            assert not server._channels
            assert time.monotonic() - started < 5
        finally:
            client.close()
            await server.stop()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_a_client_that_reads_slowly_gets_every_answer() -> None:
    async def scenario() -> None:
        server = RemotingServer(big_answer, "test", answer_drain_timeout_s=5.0)
        port = await server.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for opaque in range(1, 5):
                writer.write(encode(RemotingCommand(code=10, opaque=opaque)))
            await writer.drain()
            await asyncio.sleep(1.0)  # answers wait for the reader, within the limit
            got = 0
            while got < 4 * ANSWER_BYTES:
                chunk = await reader.read(1 << 20)
                assert chunk, "the server closed a connection whose client reads"
                got += len(chunk)
            assert server._connections
        finally:
            writer.close()
            await server.stop()

    asyncio.run(asyncio.wait_for(scenario(), 30))
