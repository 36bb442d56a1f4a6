"""AMQP 0-9-1 on the wire: the connection handshake and its polite close."""

from __future__ import annotations

import struct
from collections.abc import Generator

from waitfor import __version__
from waitfor.kind import Outcome, ProtocolError, Value
from waitfor.net.conversation import (
    Briefly,
    Closed,
    Conversation,
    Read,
    Send,
    Step,
)

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEARTBEAT = 1, 8
FRAME_END = 0xCE
MAX_FRAME = 128 * 1024  # RabbitMQ's default frame_max; the handshake frames are far smaller
START, START_OK, SECURE, TUNE, TUNE_OK = (10, 10), (10, 11), (10, 20), (10, 30), (10, 31)
OPEN, OPEN_OK, CLOSE, CLOSE_OK = (10, 40), (10, 41), (10, 50), (10, 51)
REPLY_SUCCESS, ACCESS_REFUSED, NOT_ALLOWED = 200, 403, 530


def handshake(params: dict[str, str], mode: str) -> Conversation:
    yield Send(PROTOCOL_HEADER)
    method, args = yield from read_method()
    if method != START:
        raise ProtocolError(f"expected Connection.Start, got method {method}")
    start = parse_start(args)
    if mode == "ping":
        return Outcome.up(f"{start.product} answers AMQP")
    if "PLAIN" not in start.mechanisms:
        offered = " ".join(start.mechanisms) or "none"
        # not ready rather than exit 2: what a broker offers is its configuration, which changes
        return Outcome.down(f"the broker does not offer PLAIN login (offers: {offered})")
    user, password, vhost = params["user"], params["password"], params["vhost"]
    yield Send(method_frame(START_OK, start_ok(user, password)))
    method, args = yield from read_method(after_login=True)
    if method == CLOSE:
        return (yield from refused(args, vhost))
    if method == SECURE:
        raise ProtocolError("the broker sent a login challenge PLAIN does not use")
    if method != TUNE:
        raise ProtocolError(f"expected Connection.Tune, got method {method}")
    try:
        channel_max, frame_max, _ = struct.unpack_from("!HIH", args)
    except struct.error:
        raise ProtocolError("malformed Connection.Tune") from None
    tune_ok = struct.pack("!HIH", channel_max, frame_max or MAX_FRAME, 0)  # 0: no heartbeats
    opening = method_frame(OPEN, shortstr(vhost) + shortstr("") + b"\0")
    yield Send(method_frame(TUNE_OK, tune_ok) + opening)
    method, args = yield from read_method()
    if method == CLOSE:
        return (yield from refused(args, vhost))
    if method != OPEN_OK:
        raise ProtocolError(f"expected Connection.Open-Ok, got method {method}")
    # Connection.Close, then (briefly) Close-Ok, so the broker ends the connection cleanly
    yield Send(method_frame(CLOSE, struct.pack("!H", REPLY_SUCCESS) + shortstr("") + b"\0" * 4))
    yield Briefly(1.0)
    try:
        while (yield from read_method())[0] != CLOSE_OK:
            pass
    except (TimeoutError, ProtocolError, Closed):
        pass  # the answer is already known; the broker closes on its side anyway
    return Outcome.up(f"vhost {vhost!r} open for {user!r} on {start.product}")


class Start(Value):
    product: str  # "RabbitMQ 3.10.8"
    mechanisms: tuple[str, ...]


def parse_start(args: bytes) -> Start:
    try:
        offset = 2  # version-major, version-minor
        properties, offset = longstr(args, offset)
        mechanisms, offset = longstr(args, offset)
    except (struct.error, ValueError):
        raise ProtocolError("malformed Connection.Start") from None
    fields = parse_table(properties)
    product = " ".join(f for f in (fields.get("product"), fields.get("version")) if f)
    names = mechanisms.decode("ascii", errors="replace").split()
    return Start(product or "unnamed broker", tuple(names))


def refused(args: bytes, vhost: str) -> Generator[Step, bytes, Outcome]:
    """The broker sent Connection.Close: say why in its terms, and confirm it (Close-Ok)."""
    try:
        code = struct.unpack_from("!H", args)[0]
        text = shortstr_at(args, 2)[0].decode("utf-8", errors="replace")
    except (struct.error, ValueError):
        raise ProtocolError("malformed Connection.Close") from None
    yield Send(method_frame(CLOSE_OK, b""))
    detail, lower = text.partition(" - ")[2] or text, text.lower()
    if code == ACCESS_REFUSED and "login was refused" in lower:
        return Outcome.down(f"authentication failed ({detail})")
    if code == NOT_ALLOWED and "vhost" in lower and "not found" in lower:
        return Outcome.down(f"vhost {vhost!r} not found")
    if code in (ACCESS_REFUSED, NOT_ALLOWED) and "access to vhost" in lower:
        return Outcome.down(f"access refused ({detail})")  # permissions are often set late
    return Outcome.down(f"the broker refused: {text or code}")


def read_method(
    *, after_login: bool = False
) -> Generator[Step, bytes, tuple[tuple[int, int], bytes]]:
    """The next method frame on channel 0 as ((class, method), arguments); heartbeats skipped."""
    while True:
        try:
            header = yield Read(7)
        except Closed as exc:
            if after_login and not exc.partial:  # brokers without authentication_failure_close
                raise ProtocolError("authentication failed (the broker hung up)") from None
            raise
        if header[:4] == b"AMQP":
            rest = header[4:] + (yield Read(1))
            raise ProtocolError(f"the broker does not speak AMQP 0-9-1 (it offers {rest.hex()})")
        kind, channel, size = struct.unpack("!BHI", header)
        if kind not in (FRAME_METHOD, 2, 3, FRAME_HEARTBEAT) or size > MAX_FRAME:
            raise ProtocolError(f"not an AMQP broker (it answered {header[:4]!r})")
        payload = yield Read(size)
        if (yield Read(1))[0] != FRAME_END:
            raise ProtocolError("malformed AMQP frame (no frame-end octet)")
        if kind == FRAME_HEARTBEAT:
            continue
        if kind != FRAME_METHOD or channel != 0 or size < 4:
            raise ProtocolError(f"unexpected AMQP frame type {kind} on channel {channel}")
        class_id, method_id = struct.unpack_from("!HH", payload)
        return (class_id, method_id), payload[4:]


def method_frame(method: tuple[int, int], args: bytes) -> bytes:
    payload = struct.pack("!HH", *method) + args
    return struct.pack("!BHI", FRAME_METHOD, 0, len(payload)) + payload + bytes([FRAME_END])


def start_ok(user: str, password: str) -> bytes:
    capabilities = table({"authentication_failure_close": True})
    properties = table(
        {
            "product": "waitfor",
            "version": __version__,
            "platform": "Python",
            "connection_name": "waitfor",
            "capabilities": capabilities,
        }
    )
    response = b"\0" + user.encode() + b"\0" + password.encode()
    return (
        struct.pack("!I", len(properties))
        + properties
        + shortstr("PLAIN")
        + struct.pack("!I", len(response))
        + response
        + shortstr("en_US")
    )


def shortstr(text: str) -> bytes:
    data = text.encode()
    return bytes([len(data)]) + data


def shortstr_at(data: bytes, offset: int) -> tuple[bytes, int]:
    size = data[offset] if offset < len(data) else -1
    if size < 0 or offset + 1 + size > len(data):
        raise ValueError("short string past the end")
    return data[offset + 1 : offset + 1 + size], offset + 1 + size


def longstr(data: bytes, offset: int) -> tuple[bytes, int]:
    (size,) = struct.unpack_from("!I", data, offset)
    if offset + 4 + size > len(data):
        raise ValueError("long string past the end")
    return data[offset + 4 : offset + 4 + size], offset + 4 + size


def table(fields: dict[str, object]) -> bytes:
    """A field table of strings, booleans and nested tables: all Start-Ok needs."""
    out = b""
    for key, value in fields.items():
        out += shortstr(key)
        if isinstance(value, bool):
            out += b"t" + bytes([value])
        elif isinstance(value, bytes):  # an encoded nested table
            out += b"F" + struct.pack("!I", len(value)) + value
        else:
            data = str(value).encode()
            out += b"S" + struct.pack("!I", len(data)) + data
    return out


# Sizes of the fixed-width field types (RabbitMQ's spelling of the 0-9-1 table types).
_FIXED = {"t": 1, "b": 1, "B": 1, "s": 2, "u": 2, "I": 4, "i": 4, "l": 8, "f": 4, "d": 8, "T": 8}


def parse_table(data: bytes) -> dict[str, str]:
    """The string fields of a field table; other types are skipped, garbage ends the parse."""
    fields: dict[str, str] = {}
    offset = 0
    try:
        while offset < len(data):
            key, offset = shortstr_at(data, offset)
            kind = chr(data[offset])
            offset += 1
            if kind in ("S", "x", "F", "A"):
                value, offset = longstr(data, offset)
                if kind == "S":
                    fields[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
            elif kind in _FIXED:
                offset += _FIXED[kind]
            elif kind == "D":
                offset += 5
            elif kind != "V":
                break
    except (IndexError, ValueError, struct.error):
        pass
    return fields
