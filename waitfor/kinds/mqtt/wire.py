"""MQTT on the wire: CONNECT, CONNACK (3.1.1 and 5.0 codes) and DISCONNECT."""

from __future__ import annotations

import secrets
import struct
from collections.abc import Generator

from waitfor.kind import Outcome, ProtocolError
from waitfor.net.conversation import (
    Conversation,
    Read,
    Send,
    Step,
)
from waitfor.net.varint import varint

CONNACK = 2
DISCONNECT = b"\xe0\x00"
KEEPALIVE = 30  # seconds; we disconnect at once, this only bounds a lost connection
MAX_PACKET = 64 * 1024  # a CONNACK is 4 bytes; with 5.0 properties still tiny
UNAVAILABLE = frozenset({3, 0x88, 0x89})  # server unavailable (3.1.1, 5.0), server busy (5.0)
CREDENTIALS_REFUSED = frozenset({4, 5, 0x86, 0x87})  # bad user name or password, not authorized
REASONS = {
    1: "unacceptable protocol version",
    2: "client identifier rejected",
    3: "server unavailable",
    4: "bad user name or password",
    5: "not authorized",
    0x80: "unspecified error",
    0x81: "malformed packet",
    0x82: "protocol error",
    0x83: "implementation specific error",
    0x84: "unsupported protocol version",
    0x85: "client identifier not valid",
    0x86: "bad user name or password",
    0x87: "not authorized",
    0x88: "server unavailable",
    0x89: "server busy",
    0x8A: "banned",
    0x8C: "bad authentication method",
    0x95: "packet too large",
    0x97: "quota exceeded",
    0x9C: "use another server",
    0x9D: "server moved",
    0x9F: "connection rate exceeded",
}


def connect(credentials: tuple[str | None, str | None], mode: str) -> Conversation:
    user, password = credentials
    yield Send(connect_packet(user, password))
    code = yield from read_connack()
    if code == 0:
        yield Send(DISCONNECT)
    return verdict(code, mode, credentials=user is not None)


def verdict(code: int, mode: str, *, credentials: bool) -> Outcome:
    reason = REASONS.get(code, f"refused with code {code}")
    if code == 0:
        return Outcome.up("CONNACK: accepted")
    if mode == "ping" and code not in UNAVAILABLE:
        return Outcome.up(f"the broker answers, CONNACK: {reason}")
    if code in CREDENTIALS_REFUSED and not credentials:
        return Outcome.fatal(
            f"the broker demands credentials ({reason}) and none were given: "
            "put them in the URL, mqtt://USER:PASSWORD@HOST"
        )
    return Outcome.down(f"CONNACK: {reason}")


def connect_packet(user: str | None, password: str | None) -> bytes:
    """CONNECT, MQTT 3.1.1: clean session, a client id no real client uses."""
    flags = 0x02  # clean session
    payload = _string(f"waitfor-{secrets.token_hex(6)}")
    if user is not None or password is not None:
        flags |= 0x80
        payload += _string(user or "")
    if password is not None:
        flags |= 0x40
        payload += _string(password)
    body = _string("MQTT") + bytes([4, flags]) + struct.pack("!H", KEEPALIVE) + payload
    return b"\x10" + varint(len(body)) + body  # type, remaining length, body


def read_connack() -> Generator[Step, bytes, int]:
    """The CONNACK's return code (3.1.1) or reason code (5.0)."""
    first = yield Read(1)
    length = 0
    for shift in range(0, 28, 7):
        byte = (yield Read(1))[0]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
    else:
        raise ProtocolError("malformed MQTT packet length")
    if first[0] >> 4 != CONNACK or length < 2 or length > MAX_PACKET:
        raise ProtocolError(f"not an MQTT broker (it answered {first!r})")
    body = yield Read(length)
    return body[1]


def _string(text: str) -> bytes:
    data = text.encode()
    if len(data) > 0xFFFF:
        raise ProtocolError("credential longer than MQTT allows (65535 bytes)")
    return struct.pack("!H", len(data)) + data
