"""``mysqladmin ping``, spoken natively: no driver import, no credentials needed.

What ``mysqladmin ping`` decides, and how it is reproduced here:

- the server sends its initial handshake (protocol 10) -> alive, whatever happens to the login
  that follows ("Access denied" means the server is running);
- the server sends an error packet *instead of* a handshake (too many connections, host blocked,
  host not allowed, shutting down) -> not ready, with the server's message. mysqladmin exits 0
  there too (any server error counts as "running"); we differ on purpose, because the app cannot
  connect either. The same holds for "too many connections" or "shutting down" answered to the
  login itself;
- no connection, no answer, or an answer that is not MySQL's -> not ready.

A probe must not look like a broken client: a connection dropped after the greeting counts as a
handshake error against the client's host, and after ``max_connect_errors`` of those the server
blocks the host (a pod probing twice a second would get its node blocked within a minute). So the
exchange is finished the way mysqladmin finishes it: a login attempt (the URL's user, else the
same default user as the MySQL clients; the password only ever as the plugin's scramble, never in
clear), then ``COM_QUIT`` when it was accepted. A refused login still counts in the server's
``Aborted_connects``, exactly as mysqladmin's own would, but never against the host.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Generator

from waitfor.kind import Outcome, ProtocolError, Value
from waitfor.net.conversation import (
    Closed,
    Conversation,
    Read,
    Send,
    Step,
)

MAX_PACKET = 65536  # a greeting or an error is far smaller: anything bigger is not MySQL
PROTOCOL_10 = 10
OK, ERR, AUTH_SWITCH, MORE_DATA = 0x00, 0xFF, 0xFE, 0x01
COM_QUIT = b"\x01"
CLIENT_LONG_PASSWORD = 0x1
CLIENT_PROTOCOL_41 = 0x200
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_PLUGIN_AUTH = 0x80000
CHARSET_UTF8 = 33
FAST_AUTH_OK, FULL_AUTH_NEEDED = 3, 4
#: errors that say the server cannot take a connection now, whenever they come
SERVER_BUSY = frozenset({1040, 1053})  # ER_CON_COUNT_ERROR, ER_SERVER_SHUTDOWN


class Greeting(Value):
    version: str
    seed: bytes  # the 20-byte scramble the auth plugins hash the password with
    plugin: str


def ping(user: str, password: str) -> Conversation:
    """The greeting decides; the login that follows only finishes the exchange cleanly."""
    try:
        sequence, packet = yield from read_packet()
    except Closed:
        return Outcome.down("server closed the connection during the handshake")
    if packet[:1] == bytes([ERR]):
        code, message = parse_error(packet)
        return Outcome.down(f"server refused the connection: {message} ({code})")
    greeting = parse_greeting(packet)
    alive = f"accepting connections (MySQL protocol 10, server {greeting.version})"
    try:
        answer = yield from log_in(greeting, sequence, user, password)
    except (Closed, ConnectionError):
        return Outcome.up(alive)  # the greeting was enough; the server hung up
    if answer[:1] == bytes([OK]):
        yield Send(_packet(0, COM_QUIT))  # leave like a client, not like a crash
        return Outcome.up(alive)
    if answer[:1] == bytes([ERR]):
        code, message = parse_error(answer)
        if code in SERVER_BUSY:
            return Outcome.down(f"server refused the login: {message} ({code})")
        return Outcome.up(f"{alive}; server said: {message}")
    return Outcome.up(alive)


def log_in(
    greeting: Greeting, sequence: int, user: str, password: str
) -> Generator[Step, bytes, bytes]:
    """Answer the server until it accepts or refuses the login (or says something we do not
    follow): its last packet, or b"" when the rounds run out."""
    yield Send(_packet(sequence + 1, handshake_response(greeting, user, password)))
    for _ in range(4):  # auth switch, more data, OK: a few rounds at most
        sequence, packet = yield from read_packet()
        kind = packet[0] if packet else None
        if kind == AUTH_SWITCH:
            plugin, _, seed = packet[1:].partition(b"\0")
            reply = scramble(plugin.decode("ascii", "replace"), password, seed.rstrip(b"\0"))
        elif kind == MORE_DATA and packet[1:2] == bytes([FAST_AUTH_OK]):
            continue  # the OK follows
        elif kind == MORE_DATA and packet[1:2] == bytes([FULL_AUTH_NEEDED]):
            # caching_sha2 wants the password itself (TLS or RSA): a ping never sends it, so it
            # answers what the server takes as a wrong password, which ends the login cleanly.
            reply = b"\0"
        else:
            return packet  # OK, ERR or something else: the login is over
        yield Send(_packet(sequence + 1, reply))
    return b""  # still going after the rounds a login takes: alive, no more said


def read_packet() -> Generator[Step, bytes, tuple[int, bytes]]:
    """(sequence id, payload) of one packet."""
    header = yield Read(4)
    length = int.from_bytes(header[:3], "little")
    if length > MAX_PACKET:
        raise ProtocolError("not a MySQL server (oversized packet)")
    payload = yield Read(length)
    return header[3], payload


def parse_greeting(packet: bytes) -> Greeting:
    if not packet or packet[0] != PROTOCOL_10:
        shown = f"protocol {packet[0]}" if packet else "an empty packet"
        raise ProtocolError(f"not a MySQL server (its greeting is {shown}, not protocol 10)")
    try:
        end = packet.index(b"\0", 1)
        # MariaDB prefixes "5.5.5-" for old replication clients; people know it without.
        version = packet[1:end].decode("utf-8", "replace").removeprefix("5.5.5-")
        position = end + 1 + 4  # thread id
        seed = packet[position : position + 8]
        position += 8 + 1  # filler
        (caps_low,) = struct.unpack_from("<H", packet, position)
        position += 2 + 1 + 2  # charset, status flags
        (caps_high,) = struct.unpack_from("<H", packet, position)
        capabilities = caps_low | caps_high << 16
        seed_length = packet[position + 2]
        position += 3 + 10  # reserved
        if capabilities & CLIENT_SECURE_CONNECTION:
            size = max(13, seed_length - 8)
            seed += packet[position : position + size].rstrip(b"\0")
            position += size
        plugin = ""
        if capabilities & CLIENT_PLUGIN_AUTH:
            plugin = packet[position:].partition(b"\0")[0].decode("ascii", "replace")
    except (ValueError, IndexError, struct.error):
        raise ProtocolError("not a MySQL server (malformed greeting)") from None
    return Greeting(version, seed, plugin or "mysql_native_password")


def handshake_response(greeting: Greeting, user: str, password: str) -> bytes:
    """HandshakeResponse41: user, the plugin's scramble of the password (if any), no database."""
    flags = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION
    flags |= CLIENT_PLUGIN_AUTH
    auth = scramble(greeting.plugin, password, greeting.seed)
    return (
        struct.pack("<IIB23x", flags, 1 << 24, CHARSET_UTF8)
        + user.encode()
        + b"\0"
        + bytes([len(auth)])
        + auth
        + greeting.plugin.encode()
        + b"\0"
    )


def scramble(plugin: str, password: str, seed: bytes) -> bytes:
    """The plugin's proof of the password; empty for no password or a plugin we do not speak."""
    if not password:
        return b""
    import hashlib  # loads OpenSSL's libcrypto (~2 ms): only a login with a password needs it

    secret = password.encode()
    if plugin == "mysql_native_password":  # SHA-1 is the protocol's choice, not ours
        stage1 = hashlib.sha1(secret, usedforsecurity=False).digest()
        stage2 = hashlib.sha1(stage1, usedforsecurity=False).digest()
        mask = hashlib.sha1(seed[:20] + stage2, usedforsecurity=False).digest()
        return bytes(a ^ b for a, b in zip(stage1, mask, strict=True))
    if plugin == "caching_sha2_password":
        stage1 = hashlib.sha256(secret).digest()
        stage2 = hashlib.sha256(stage1).digest()
        mask = hashlib.sha256(stage2 + seed[:20]).digest()
        return bytes(a ^ b for a, b in zip(stage1, mask, strict=True))
    return b""


def parse_error(packet: bytes) -> tuple[int, str]:
    """(code, message) of an ERR packet, with or without the ``#SQLSTATE`` marker."""
    code = struct.unpack_from("<H", packet, 1)[0] if len(packet) >= 3 else 0
    message = packet[3:]
    if message[:1] == b"#":
        message = message[6:]
    return code, message.decode("utf-8", "replace").strip() or "error without message"


def default_user() -> str:
    """The user the MySQL clients log in as when none is given: root for root, else the login."""
    if os.geteuid() == 0:
        return "root"
    import getpass  # loads termios: only a non-root user without a user in the URL needs it

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, no USER: a container's numeric user
        return "UNKNOWN_USER"


def _packet(sequence: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([sequence & 0xFF]) + payload
