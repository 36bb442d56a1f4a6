"""MQTT: ``mqtt://[user[:password]@]host[:port]``, ``mqtts://`` for TLS.

Spoken natively: ``CONNECT`` (MQTT 3.1.1, clean session, a random ``waitfor-`` client id, so a real
client's session is never taken over), ``CONNACK``, then ``DISCONNECT``. 5.0 reason codes are
understood too (a 5.0-only broker answers a 3.1.1 CONNECT with them).

``login`` (the default) is ready on CONNACK 0. "Server unavailable" is not ready, and so are
credentials the broker refuses ("not authorized": users and ACLs often appear after the broker
does). A broker that refuses a client which gave no credentials at all is a configuration error
(exit 2): it demands credentials, and no amount of waiting will make the target carry them.
``ping`` is ready on any CONNACK but "server unavailable"/"server busy": the broker answers MQTT,
whatever it thinks of the login.
"""

from __future__ import annotations

import asyncio
import secrets
import struct
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from waitfor import redaction, urls
from waitfor.checks import tlsconfig
from waitfor.checks.base import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    describe_os_error,
    host_port,
    reject_unknown,
    single,
)

if TYPE_CHECKING:
    import ssl

CONNACK = 2
DISCONNECT = b"\xe0\x00"
KEEPALIVE = 30  # seconds; we disconnect at once, this only bounds a lost connection
MAX_PACKET = 64 * 1024  # a CONNACK is 4 bytes; with 5.0 properties still tiny
MODES = ("login", "ping")
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


class ProtocolError(Exception):
    """The peer's bytes are not the MQTT we expect: the message says what was wrong."""


@dataclass(frozen=True)
class MqttOptions:
    mode: str = "login"
    tls: tlsconfig.TlsOptions = field(default_factory=tlsconfig.TlsOptions)


class MqttCheck(Check):
    OPTION_NAMES = frozenset({"mode"}) | tlsconfig.OPTION_NAMES
    USAGE: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "mqtt://[USER[:PASSWORD]@]HOST[:PORT], mqtts://…",
            "CONNACK 0 (accepted); #mode=ping: any CONNACK but server unavailable",
        ),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        host = urls.host(parts)
        port = urls.port(parts, 8883 if scheme == "mqtts" else 1883)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(f"{scheme} targets are {scheme}://[user[:password]@]host[:port]")
        params = []
        if parts.username is not None:
            params.append(("user", urls.decoded(parts.username, "user")))
        if parts.password is not None:
            params.append(("password", urls.decoded(parts.password, "password")))
        if any(len(value.encode()) > 0xFFFF for _, value in params):
            raise ValueError("MQTT user names and passwords are at most 65535 bytes")
        userinfo = redaction.userinfo(parts.username, parts.password)
        display = f"{scheme}://{userinfo}{host_port(host, port)}"
        secrets = frozenset({parts.password} if parts.password else set())
        return Address(host, port, display, secrets, tuple(params))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> MqttOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode = (single(pairs, "mode") or "login").lower()
        if mode not in MODES:
            raise ValueError(f"mode must be login or ping, not {mode!r}")
        return MqttOptions(mode=mode, tls=tlsconfig.parse_tls_options(pairs))

    @cached_property
    def _tls(self) -> ssl.SSLContext | None:  # made once per target: loading CAs is not free
        options: MqttOptions = self.target.options  # type: ignore[assignment]
        return tlsconfig.client_context(options.tls) if self.target.scheme == "mqtts" else None

    async def probe(self, budget: float) -> Outcome:
        from waitfor.checks import net

        options: MqttOptions = self.target.options  # type: ignore[assignment]
        try:
            reader, writer = await net.open_stream(
                self.target.host, self.target.port or 1883, budget, tls=self._tls
            )
        except net.NetError as exc:
            return Outcome.down(str(exc))
        user, password = self.target.param("user"), self.target.param("password")
        try:
            writer.write(connect_packet(user, password))
            code = await read_connack(reader)
            if code == 0:
                writer.write(DISCONNECT)
                await writer.drain()
            return verdict(code, options.mode, credentials=user is not None)
        except ProtocolError as exc:
            return Outcome.down(str(exc))
        except asyncio.IncompleteReadError:
            return Outcome.down("the broker closed the connection before CONNACK")
        except OSError as exc:
            return Outcome.down(f"connection lost: {describe_os_error(exc)}")
        finally:
            writer.close()


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
    return b"\x10" + _remaining_length(len(body)) + body


async def read_connack(reader: asyncio.StreamReader) -> int:
    """The CONNACK's return code (3.1.1) or reason code (5.0)."""
    first = await reader.readexactly(1)
    length = 0
    for shift in range(0, 28, 7):
        byte = (await reader.readexactly(1))[0]
        length |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
    else:
        raise ProtocolError("malformed MQTT packet length")
    if first[0] >> 4 != CONNACK or length < 2 or length > MAX_PACKET:
        raise ProtocolError(f"not an MQTT broker (it answered {first!r})")
    body = await reader.readexactly(length)
    return body[1]


def _string(text: str) -> bytes:
    data = text.encode()
    if len(data) > 0xFFFF:
        raise ProtocolError("credential longer than MQTT allows (65535 bytes)")
    return struct.pack("!H", len(data)) + data


def _remaining_length(size: int) -> bytes:
    out = bytearray()
    while True:
        byte, size = size & 0x7F, size >> 7
        out.append(byte | (0x80 if size else 0))
        if not size:
            return bytes(out)
