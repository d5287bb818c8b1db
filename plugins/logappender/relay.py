"""``python -m plugins.logappender.relay``: sends the batches a forked child's log sender writes to its stdin.

Started by ``RelayTransport`` (never by hand). Frames are length-prefixed JSON: a config first, then batches;
each batch is answered on stdout with ``{"ok": true}`` or the failure. End of input shuts the producer down.
"""

from __future__ import annotations

import sys
from typing import IO

from plugins.logappender.config import AppenderConfig
from plugins.logappender.record import OutMessage
from plugins.logappender.transport import OmsTransport, Ordering, SendFailed, read_frame, write_frame


def serve(inp: IO[bytes], out: IO[bytes]) -> int:
    first = read_frame(inp)
    if first is None:
        return 0
    raw = first["config"]
    config = AppenderConfig.build(raw.pop("topic"), **raw)
    transport = OmsTransport(config, str(first["appender_type"]), pid=int(first["pid"]))
    try:
        while (frame := read_frame(inp)) is not None:
            messages = [OutMessage.from_json(m) for m in frame["messages"]]
            try:
                transport.send(messages, config.send_timeout, Ordering(frame.get("ordering", "none")))
            except SendFailed as exc:
                write_frame(out, {"ok": False, "failure": exc.failure.value, "error": str(exc)})
                continue
            write_frame(out, {"ok": True})
    finally:
        transport.close()
    return 0


def main() -> int:
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries frames only
    return serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    raise SystemExit(main())
