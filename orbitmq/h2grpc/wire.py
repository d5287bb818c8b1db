"""gRPC's wire format over HTTP/2: message framing, status trailers, deadlines and metadata headers; pure functions
and one incremental reader, no sockets and no h2 (protocol.py and call.py use them)."""

from __future__ import annotations

import base64
import binascii
import gzip
import re
import zlib

import grpc

PREFIX = 5  # compressed flag + 4-byte big-endian length
GRPC_CONTENT_TYPE = b"application/grpc"
ACCEPT_ENCODING = b"identity,deflate,gzip"  # what request messages may be compressed with; answers are never compressed
RESPONSE_HEADERS: list[tuple[bytes, bytes]] = [
    (b":status", b"200"),
    (b"content-type", GRPC_CONTENT_TYPE),
    (b"grpc-accept-encoding", ACCEPT_ENCODING),
]
# Request headers that are transport, not the caller's metadata (grpcio leaves them out of invocation_metadata too).
TRANSPORT_HEADERS = frozenset(
    {b"te", b"content-type", b"grpc-timeout", b"grpc-encoding", b"grpc-accept-encoding", b"content-length"}
)
_TIMEOUT_UNITS = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}


# What h2's inbound validation would refuse that could do harm here: names not lowercase tokens (a leading ':' for
# pseudo-headers), values with NUL, CR or LF (they end up in metadata, logs and ACL checks). h2's own validation is
# off (protocol.py): its generator chain per header cost ~12% of the server's CPU per call.
_HEADER_NAME = re.compile(rb":?[a-z0-9!#$%&'*+\-.^_`|~]+")
_HEADER_VALUE_ILLEGAL = re.compile(rb"[\x00\r\n]")


def headers_valid(headers: list[tuple[bytes, bytes]]) -> bool:
    """False for a request HTTP/2 calls malformed in ways that matter to a gRPC server (RFC 9113 §8.2.1)."""
    for name, value in headers:
        if _HEADER_NAME.fullmatch(name) is None or _HEADER_VALUE_ILLEGAL.search(value) is not None:
            return False
    return True


class WireError(Exception):
    """A request the server refuses at the wire level: the call ends with ``code`` and ``details``."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


def prefix(size: int) -> bytes:
    """The 5-byte prefix of an uncompressed message of ``size`` bytes."""
    return b"\x00" + size.to_bytes(4, "big")


def encode_message(details: str) -> bytes:
    """``grpc-message``: UTF-8, percent-encoding every byte outside printable ASCII and ``%`` itself (gRPC spec)."""
    raw = details.encode("utf-8", "replace")
    if all(0x20 <= b <= 0x7E and b != 0x25 for b in raw):
        return raw
    return b"".join(bytes((b,)) if 0x20 <= b <= 0x7E and b != 0x25 else b"%%%02X" % b for b in raw)


def trailers(
    code: grpc.StatusCode, details: str = "", metadata: tuple[tuple[str, str | bytes], ...] = ()
) -> list[tuple[bytes, bytes]]:
    out = [(b"grpc-status", str(code.value[0]).encode())]
    if details:
        out.append((b"grpc-message", encode_message(details)))
    out.extend(encode_metadata(metadata))
    return out


def encode_metadata(metadata: tuple[tuple[str, str | bytes], ...]) -> list[tuple[bytes, bytes]]:
    """Headers of application metadata: ``-bin`` values base64 (unpadded, as gRPC sends them), the rest ASCII."""
    out = []
    for key, value in metadata:
        name = key.lower().encode("ascii")
        if name.endswith(b"-bin"):
            raw = value if isinstance(value, bytes) else value.encode()
            out.append((name, base64.b64encode(raw).rstrip(b"=")))
        else:
            out.append((name, value.encode("ascii") if isinstance(value, str) else value))
    return out


def decode_metadata(headers: list[tuple[bytes, bytes]]) -> tuple[tuple[str, str | bytes], ...]:
    """The caller's metadata as grpcio hands it to a handler: no pseudo or transport headers, ``-bin`` decoded."""
    out: list[tuple[str, str | bytes]] = []
    for name, value in headers:
        if name[:1] == b":" or name in TRANSPORT_HEADERS:
            continue
        if name.endswith(b"-bin"):
            try:
                out.append((name.decode("ascii"), base64.b64decode(value + b"=" * (-len(value) % 4))))
            except (binascii.Error, ValueError):
                raise WireError(grpc.StatusCode.INTERNAL, f"metadata {name!r} is not valid base64") from None
        else:
            out.append((name.decode("ascii"), value.decode("latin-1")))
    return tuple(out)


def parse_timeout(value: bytes) -> float:
    """Seconds of a ``grpc-timeout`` header (at most 8 digits and a unit, e.g. ``2999m``)."""
    digits, unit = value[:-1], value[-1:]
    if not digits.isdigit() or len(digits) > 8 or unit not in _TIMEOUT_UNITS:
        raise WireError(grpc.StatusCode.INTERNAL, f"malformed grpc-timeout {value!r}")
    return int(digits) * _TIMEOUT_UNITS[unit]


def decompressor(encoding: bytes | None) -> str | None:
    """The ``grpc-encoding`` of a request when its compressed messages can be read; WireError otherwise."""
    if encoding is None or encoding == b"identity":
        return None
    if encoding == b"gzip":
        return "gzip"
    if encoding == b"deflate":
        return "deflate"
    raise WireError(grpc.StatusCode.UNIMPLEMENTED, f"grpc-encoding {encoding.decode(errors='replace')} not supported")


class MessageReader:
    """Splits a request stream's DATA into gRPC messages; refuses one larger than ``max_size`` by its prefix alone,
    before its bytes arrive, so an oversize request is never buffered."""

    __slots__ = ("_buf", "_encoding", "_max_size")

    def __init__(self, max_size: int, encoding: str | None) -> None:
        self._buf = bytearray()
        self._max_size = max_size
        self._encoding = encoding

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        if not buf and len(data) >= PREFIX and data[0] == 0 and int.from_bytes(data[1:PREFIX]) == len(data) - PREFIX:
            # the usual case: one DATA event holding exactly one uncompressed message
            self._check_size(len(data) - PREFIX)
            return [data[PREFIX:]]
        buf += data
        out: list[bytes] = []
        while len(buf) >= PREFIX:
            size = int.from_bytes(buf[1:PREFIX])
            self._check_size(size)
            if len(buf) < PREFIX + size:
                break
            flag = buf[0]
            message = bytes(buf[PREFIX : PREFIX + size])
            del buf[: PREFIX + size]
            out.append(self._decompress(message) if flag else message)
        return out

    @property
    def pending(self) -> int:
        """Bytes of a message not yet complete (at the end of the stream: a truncated request)."""
        return len(self._buf)

    def _check_size(self, size: int) -> None:
        if size > self._max_size:
            raise WireError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Received message larger than max ({size} vs. {self._max_size})",
            )

    def _decompress(self, message: bytes) -> bytes:
        if self._encoding is None:
            raise WireError(grpc.StatusCode.INTERNAL, "compressed message without grpc-encoding")
        try:
            wbits = 16 + zlib.MAX_WBITS if self._encoding == "gzip" else zlib.MAX_WBITS
            inflater = zlib.decompressobj(wbits)
            # bounded: a small compressed message must not inflate past the limit (a zip bomb)
            out = inflater.decompress(message, self._max_size + 1)
        except (zlib.error, gzip.BadGzipFile) as exc:
            raise WireError(grpc.StatusCode.INTERNAL, f"cannot decompress the request: {exc}") from None
        self._check_size(len(out))
        return out
