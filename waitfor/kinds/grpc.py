"""gRPC: the standard health protocol, ``grpc.health.v1.Health/Check``, like grpc_health_probe.

Ready when the server answers ``SERVING`` for the target's ``service`` (default ``""``: the whole
server). ``NOT_SERVING``, ``UNKNOWN``, an unknown service (``NOT_FOUND``) and every transport error
are not ready, with the status named. A server without the health service answers
``UNIMPLEMENTED``: retrying cannot change that, so it is a configuration error (exit 2), as
grpc_health_probe treats it as a failed RPC rather than an unhealthy answer.

The call is one HTTP/2 request carrying a protobuf message of one string field, and its answer
one enum field: the ``h2`` state machine and a few lines of wire format do it, so the kind needs
no gRPC runtime (grpcio is tens of megabytes and slow to import). ``h2`` is imported per probe.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from functools import cached_property

from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    Value,
    describe_os_error,
    host_port,
    reject_unknown,
    single,
    unquote,
    urls,
)
from waitfor.net import tls
from waitfor.net.varint import varint

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from waitfor.kind import Deadline

if TYPE_CHECKING:  # asyncio, ssl and the shared connect helper are imported when probing
    import asyncio
    import ssl

HEALTH_CHECK = "/grpc.health.v1.Health/Check"
#: HealthCheckResponse.ServingStatus
SERVING_STATUS = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}
#: gRPC status codes (grpc/grpc doc/statuscodes.md)
CODES = (
    *("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND"),
    *("ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION"),
    *("ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS"),
    "UNAUTHENTICATED",
)
UNIMPLEMENTED, NOT_FOUND = CODES.index("UNIMPLEMENTED"), CODES.index("NOT_FOUND")
#: the answer is two bytes of protobuf; anything much longer is not a health answer
ANSWER_LIMIT = 16 * 1024
#: frames (h2's events, about one a frame) the server may send before its answer ends: a health
#: check's are 10-15, while a flood of PINGs or SETTINGS (each acknowledged) would hold the
#: probe and the CPU until the attempt's deadline
FRAME_LIMIT = 1000
STATUS_DIGITS = 10  # grpc-status is an int32 (0-16 in use): more digits is not gRPC
MALFORMED_STATUS = -1  # a grpc-status that is not one
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_AUTHORITY = re.compile(r"[A-Za-z0-9._~%!$&'()*+,;=:\[\]-]+")


class GrpcOptions(Value):
    service: str = ""
    authority: str | None = None
    tls: tls.TlsOptions = tls.TlsOptions()


class GrpcCheck(Check[GrpcOptions]):
    USAGE = (
        ("grpc://HOST:PORT", "the gRPC health service answers SERVING"),
        ("grpcs://HOST:PORT#service=NAME&cacert=ca.pem", "the same over TLS, for one service"),
    )
    PLAIN_OPTIONS = tls.PLAIN_OPTIONS
    OPTION_NAMES = frozenset({"service", "authority"}) | tls.OPTION_NAMES

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        if parts.username is not None or parts.password is not None:
            raise ValueError(f"{scheme} targets take no user or password")
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(f"{scheme} targets are {scheme}://HOST[:PORT] (use #service=NAME)")
        host = urls.host(parts)
        port = urls.port(parts, default=443 if scheme == "grpcs" else 80)
        return Address(host=host, port=port, display=f"{scheme}://{host_port(host, port)}")

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> GrpcOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        authority = single(pairs, "authority")
        if authority is not None and not _AUTHORITY.fullmatch(authority):
            raise ValueError(f"authority {authority!r} is not a HOST[:PORT]")
        return GrpcOptions(
            service=single(pairs, "service") or "",
            authority=authority,
            tls=tls.parse_tls_options(pairs),
        )

    @cached_property
    def _tls(self) -> ssl.SSLContext | None:
        if self.target.scheme != "grpcs":
            return None  # --insecure / --cacert defaults reach plaintext targets too: moot
        return tls.client_context_for(self.options.tls, alpn=("h2",))

    async def probe(self, deadline: Deadline) -> Outcome:
        import ssl

        import h2.exceptions

        from waitfor.net import aio

        host, port = self.target.host, self.target.port or 0
        authority = self.options.authority or host_port(host, port)
        try:
            reader, writer = await aio.open_stream(
                host,
                port,
                deadline,
                tls=self._tls,
                server_hostname=_server_name(authority) if self._tls else None,
            )
        except aio.NetError as exc:
            return Outcome.down(str(exc))
        try:
            if self._tls and writer.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
                return Outcome.down("the server did not agree to HTTP/2 (ALPN h2): not gRPC")
            answer = await _call(reader, writer, authority, self.options.service, self._tls)
        except h2.exceptions.ProtocolError as exc:
            return Outcome.down(f"not an HTTP/2 answer, is it a gRPC server? ({exc})")
        except _NoAnswer as exc:
            return Outcome.down(str(exc))
        except (ssl.SSLError, OSError) as exc:
            return Outcome.down(_describe(exc))
        finally:
            writer.transport.abort()  # a probe leaves nothing behind, not even a TLS goodbye
        return self._judge(answer)

    def _judge(self, answer: _Answer) -> Outcome:
        service = self.options.service
        what = f"service {service!r}" if service else "server"
        if answer.http_status != "200":
            return Outcome.down(f"HTTP {answer.http_status} instead of a gRPC answer")
        if answer.code is None:
            return Outcome.down("the answer has no grpc-status: not a gRPC server?")
        if answer.code == MALFORMED_STATUS:
            return Outcome.down("the answer's grpc-status is not a status code: not a gRPC server?")
        message = f": {answer.message}" if answer.message else ""
        if answer.code == UNIMPLEMENTED:
            return Outcome.fatal(
                "the server does not implement the gRPC health service grpc.health.v1.Health "
                f"(UNIMPLEMENTED{message})"
            )
        if answer.code == NOT_FOUND:
            return Outcome.down(f"{what} unknown to the health service (NOT_FOUND{message})")
        if answer.code != 0:
            name = CODES[answer.code] if answer.code < len(CODES) else f"code {answer.code}"
            return Outcome.down(f"health check failed: {name}{message}")
        status = _serving_status(answer.body)
        if status == "SERVING":
            return Outcome.up(f"{what} SERVING")
        return Outcome.down(f"{what} {status}")


@dataclass
class _Answer:
    http_status: str = ""
    code: int | None = None
    message: str = ""
    body: bytes = b""


class _NoAnswer(Exception):
    pass


async def _call(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    authority: str,
    service: str,
    tls: ssl.SSLContext | None,
) -> _Answer:
    """One unary Check call on a fresh HTTP/2 connection; the runner bounds its time."""
    import h2.config
    import h2.connection
    import h2.events

    connection = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding="utf-8")
    )
    connection.initiate_connection()
    stream = connection.get_next_available_stream_id()
    connection.send_headers(
        stream,
        [
            (":method", "POST"),
            (":scheme", "https" if tls else "http"),
            (":path", HEALTH_CHECK),
            (":authority", authority),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("user-agent", "waitfor"),
        ],
    )
    connection.send_data(stream, _frame(_request(service)), end_stream=True)
    writer.write(connection.data_to_send())
    answer = _Answer()
    body = bytearray()
    first = b""  # what the server said first, to name a server that is not HTTP/2
    spoke_http2 = False
    frames = 0
    while True:
        data = await reader.read(65536)
        first = first or data
        if not data and first and not spoke_http2:
            line = _CONTROL.sub("", first[:200].decode("ascii", "replace").splitlines()[0])
            raise _NoAnswer(f"not HTTP/2, is it a gRPC server? (the server sent {line[:60]!r})")
        if not data:
            raise _NoAnswer("the server closed the connection without answering")
        for event in connection.receive_data(data):
            spoke_http2 = True
            frames += 1
            if frames > FRAME_LIMIT:
                raise _NoAnswer(f"over {FRAME_LIMIT} HTTP/2 frames and no answer: a flood")
            if isinstance(event, h2.events.ResponseReceived | h2.events.TrailersReceived):
                _take_headers(answer, event.headers)
            elif isinstance(event, h2.events.DataReceived) and event.stream_id == stream:
                body += event.data
                connection.acknowledge_received_data(event.flow_controlled_length, stream)
                if len(body) > ANSWER_LIMIT:
                    raise _NoAnswer(f"the answer is over {ANSWER_LIMIT} bytes: not a health check")
            elif isinstance(event, h2.events.StreamReset) and event.stream_id == stream:
                raise _NoAnswer(f"the server reset the call (HTTP/2 {_code(event.error_code)})")
            elif isinstance(event, h2.events.ConnectionTerminated):
                raise _NoAnswer(
                    f"the server closed the connection (GOAWAY {_code(event.error_code)})"
                )
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id == stream:
                answer.body = bytes(body)
                return answer
        writer.write(connection.data_to_send())


def _code(error: object) -> str:
    """An HTTP/2 error code by name: ``INTERNAL_ERROR`` rather than ``2``."""
    return str(getattr(error, "name", error))


def _take_headers(answer: _Answer, headers: Any) -> None:
    for name, value in headers:
        if name == ":status":
            answer.http_status = value
        elif name == "grpc-status":
            # ASCII digits, a few: int() also takes "²"-like digits (ValueError) and thousands
            # of them (ValueError past its 4,300-digit limit, slow below it).
            ok = value.isascii() and value.isdigit() and len(value) <= STATUS_DIGITS
            answer.code = int(value) if ok else MALFORMED_STATUS
        elif name == "grpc-message":
            answer.message = " ".join(unquote(value).split())[:200]


def _request(service: str) -> bytes:
    """HealthCheckRequest{service}: field 1, length-delimited; empty is the default, omitted."""
    encoded = service.encode()
    return b"\x0a" + varint(len(encoded)) + encoded if encoded else b""


def _frame(message: bytes) -> bytes:
    """gRPC length-prefixed message: not compressed, 4-byte big-endian length."""
    return struct.pack(">BI", 0, len(message)) + message


def _serving_status(body: bytes) -> str:
    """HealthCheckResponse.status from the length-prefixed answer; fields unknown are skipped."""
    if len(body) < 5:
        return "without a message"
    compressed, length = struct.unpack(">BI", body[:5])
    if compressed:
        return "in a compressed message (none was asked for)"
    message, status, index = body[5 : 5 + length], 0, 0
    try:
        while index < len(message):
            key, index = _read_varint(message, index)
            field, wire = key >> 3, key & 7
            if wire == 0:
                value, index = _read_varint(message, index)
                if field == 1:
                    status = value
            elif wire == 2:
                size, index = _read_varint(message, index)
                index += size
            elif wire in (1, 5):
                index += 8 if wire == 1 else 4
            else:
                return "in a message that is not a HealthCheckResponse"
    except IndexError:
        return "in a truncated message"
    return SERVING_STATUS.get(status, f"status {status}")


def _read_varint(data: bytes, index: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[index]
        index += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80 or shift > 63:
            return value, index


def _server_name(authority: str) -> str:
    """The host part of an authority: what TLS verifies and sends as SNI."""
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


def _describe(exc: BaseException) -> str:
    import ssl

    if isinstance(exc, ssl.SSLError):
        return f"TLS error: {exc.reason or exc}"
    if isinstance(exc, OSError):
        return describe_os_error(exc)
    return str(exc)
