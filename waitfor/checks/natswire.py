"""NATS on the wire: INFO, CONNECT, PING/PONG and the JetStream request, for :mod:`.nats`.

Imported when a nats target is probed (it needs asyncio), not when one is parsed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from waitfor import __version__
from waitfor.checks import net
from waitfor.checks.base import Outcome, describe_os_error

if TYPE_CHECKING:
    import ssl

MAX_PAYLOAD = 1024 * 1024  # the server's default max_payload
JS_INFO = "$JS.API.INFO"


class ProtocolError(Exception):
    """The peer's bytes are not the NATS we expect: the message says what was wrong."""


class Refused(Exception):
    """The server answered -ERR: the message is its words."""


async def probe(
    address: tuple[str, int],
    params: dict[str, str],
    *,
    mode: str,
    jetstream: bool,
    require_tls: bool,
    tls: Callable[[], ssl.SSLContext],
    budget: float,
) -> Outcome:
    """``tls`` makes the client context, only when TLS is used."""
    deadline = time.monotonic() + budget
    try:
        reader, writer = await net.open_stream(*address, budget)
    except net.NetError as exc:
        return Outcome.down(str(exc))
    try:
        info = await read_info(reader)
        if mode == "ping":
            return Outcome.up(f"{describe_server(info)} answers")
        if require_tls and not (info.get("tls_required") or info.get("tls_available")):
            return Outcome.down("the server does not offer TLS")
        if require_tls or info.get("tls_required"):
            remaining = max(deadline - time.monotonic(), 0.0)
            await net.start_tls(writer, tls(), address[0], remaining)
        if info.get("auth_required") and not params:
            return Outcome.fatal(
                "the server requires credentials and none were given: put them in the URL, "
                "nats://USER:PASSWORD@HOST or nats://TOKEN@HOST"
            )
        writer.write(connect_line(params, tls=require_tls or bool(info.get("tls_required"))))
        writer.write(b"PING\r\n")
        await until_pong(reader, writer)
        detail = describe_server(info)
        if jetstream:
            return await jetstream_info(reader, writer, detail)
        return Outcome.up(f"PONG from {detail}")
    except (Refused, net.NetError) as exc:
        return Outcome.down(str(exc))
    except ProtocolError as exc:
        return Outcome.down(str(exc))
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        if isinstance(exc, asyncio.IncompleteReadError) and not exc.partial:
            return Outcome.down("the server closed the connection")
        return Outcome.down("not a NATS server (no protocol line)")
    except OSError as exc:
        return Outcome.down(f"connection lost: {describe_os_error(exc)}")
    finally:
        writer.close()


async def read_info(reader: asyncio.StreamReader) -> dict[str, Any]:
    line = await read_line(reader)
    if line.startswith("-ERR"):
        raise Refused(f"the server refused: {error_text(line)}")
    verb, _, body = line.partition(" ")
    if verb.upper() != "INFO":
        raise ProtocolError(f"not a NATS server (it answered {line[:40]!r})")
    try:
        info = json.loads(body)
    except ValueError:
        raise ProtocolError("malformed INFO from the server") from None
    if not isinstance(info, dict):
        raise ProtocolError("malformed INFO from the server")
    return info


async def until_pong(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        line = await read_line(reader)
        verb = line.partition(" ")[0].upper()
        if verb == "PONG":
            return
        if verb == "PING":
            writer.write(b"PONG\r\n")
        elif verb == "-ERR":
            raise Refused(error_text(line))
        elif verb not in ("+OK", "INFO"):
            raise ProtocolError(f"unexpected answer to PING: {line[:40]!r}")


async def jetstream_info(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, detail: str
) -> Outcome:
    """Request $JS.API.INFO on a random inbox; with no_responders, no JetStream = a 503 at once."""
    inbox = f"_INBOX.waitfor.{secrets.token_hex(11)}"
    writer.write(f"SUB {inbox} 1\r\nPUB {JS_INFO} {inbox} 0\r\n\r\nPING\r\n".encode())
    while True:
        line = await read_line(reader)
        verb, _, rest = line.partition(" ")
        verb = verb.upper()
        if verb in ("MSG", "HMSG"):
            fields = rest.split()
            try:
                sizes = [int(fields[-1])] if verb == "MSG" else [int(fields[-2]), int(fields[-1])]
            except (IndexError, ValueError):
                raise ProtocolError(f"malformed {verb} line") from None
            if not all(0 <= s <= MAX_PAYLOAD for s in sizes):
                raise ProtocolError(f"malformed {verb} line")
            data = (await reader.readexactly(sizes[-1] + 2))[:-2]
            writer.write(b"UNSUB 1\r\n")
            if verb == "HMSG":
                status = data[: sizes[0]].split(b"\r\n", 1)[0].decode("ascii", "replace")
                if " 503" in status:
                    return Outcome.down("JetStream is not enabled (no responders for $JS.API.INFO)")
                return Outcome.down(f"JetStream did not answer ({status.strip()})")
            return jetstream_verdict(data, detail)
        if verb == "PING":
            writer.write(b"PONG\r\n")
        elif verb == "-ERR":
            raise Refused(f"JetStream request refused: {error_text(line)}")
        elif verb not in ("+OK", "INFO", "PONG"):
            raise ProtocolError(f"unexpected answer to the JetStream request: {line[:40]!r}")


def jetstream_verdict(data: bytes, detail: str) -> Outcome:
    try:
        answer = json.loads(data)
    except ValueError:
        return Outcome.down("JetStream answered with something that is not JSON")
    if not isinstance(answer, dict):
        return Outcome.down("JetStream answered with something unexpected")
    error = answer.get("error")
    if error is not None:
        text = error.get("description") if isinstance(error, dict) else error
        return Outcome.down(f"JetStream: {text}")
    streams = answer.get("streams")
    counted = f", {streams} streams" if isinstance(streams, int) else ""
    return Outcome.up(f"JetStream answers on {detail}{counted}")


def connect_line(params: dict[str, str], *, tls: bool) -> bytes:
    fields: dict[str, object] = {
        "verbose": False,
        "pedantic": False,
        "tls_required": tls,
        "name": "waitfor",
        "lang": "python-waitfor",
        "version": __version__,
        "protocol": 1,
        "headers": True,
        "no_responders": True,  # a request nobody serves is answered 503 at once
    }
    if "token" in params:
        fields["auth_token"] = params["token"]
    elif "user" in params:
        fields["user"], fields["pass"] = params["user"], params["password"]
    return f"CONNECT {json.dumps(fields)}\r\n".encode()


async def read_line(reader: asyncio.StreamReader) -> str:
    line = await reader.readuntil(b"\r\n")
    return line[:-2].decode("utf-8", errors="replace")


def error_text(line: str) -> str:
    """``-ERR 'Authorization Violation'`` -> ``authorization violation``."""
    return line[4:].strip().strip("'").lower() or "error without a message"


def describe_server(info: dict[str, Any]) -> str:
    version = info.get("version")
    return f"nats-server {version}" if isinstance(version, str) else "the NATS server"
