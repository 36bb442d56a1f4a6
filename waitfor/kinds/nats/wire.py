"""NATS on the wire: INFO, CONNECT, PING/PONG and the JetStream request (TLS upgraded after INFO,
as the clients do; the quick first attempt leaves that to the runner)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Generator

from waitfor import __version__
from waitfor.kind import Outcome, ProtocolError
from waitfor.net.conversation import Conversation, Read, ReadLine, Send, StartTls, Step

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_PAYLOAD = 1024 * 1024  # the server's default max_payload
MAX_LINE = 64 * 1024  # a protocol line (INFO lists cluster URLs, still far smaller)
JS_INFO = "$JS.API.INFO"


class TooDeep(ValueError):
    """JSON nested deeper than the parser can follow."""


class Refused(ProtocolError):
    """The server answered -ERR: the message is its words."""


def connect(
    params: dict[str, str], *, mode: str, jetstream: bool, require_tls: bool
) -> Conversation:
    info = yield from read_info()
    if mode == "ping":
        return Outcome.up(f"{describe_server(info)} answers")
    if require_tls and not (info.get("tls_required") or info.get("tls_available")):
        return Outcome.down("the server does not offer TLS")
    if require_tls or info.get("tls_required"):
        yield StartTls()
    if info.get("auth_required") and not params:
        return Outcome.fatal(
            "the server requires credentials and none were given: put them in the URL, "
            "nats://USER:PASSWORD@HOST or nats://TOKEN@HOST"
        )
    tls = require_tls or bool(info.get("tls_required"))
    yield Send(connect_line(params, tls=tls) + b"PING\r\n")
    yield from until_pong()
    detail = describe_server(info)
    if jetstream:
        return (yield from jetstream_info(detail))
    return Outcome.up(f"PONG from {detail}")


def read_info() -> Generator[Step, bytes, dict[str, Any]]:
    line = yield from read_line()
    if line.startswith("-ERR"):
        raise Refused(f"the server refused: {error_text(line)}")
    verb, _, body = line.partition(" ")
    if verb.upper() != "INFO":
        raise ProtocolError(f"not a NATS server (it answered {line[:40]!r})")
    try:
        info = loads(body)
    except TooDeep:
        raise ProtocolError("malformed INFO from the server (JSON nested too deeply)") from None
    except ValueError:
        raise ProtocolError("malformed INFO from the server") from None
    if not isinstance(info, dict):
        raise ProtocolError("malformed INFO from the server")
    return info


def until_pong() -> Generator[Step, bytes, None]:
    while True:
        line = yield from read_line()
        verb = line.partition(" ")[0].upper()
        if verb == "PONG":
            return
        if verb == "PING":
            yield Send(b"PONG\r\n")
        elif verb == "-ERR":
            raise Refused(error_text(line))
        elif verb not in ("+OK", "INFO"):
            raise ProtocolError(f"unexpected answer to PING: {line[:40]!r}")


def jetstream_info(detail: str) -> Generator[Step, bytes, Outcome]:
    """Request $JS.API.INFO on a random inbox; with no_responders, no JetStream = a 503 at once."""
    inbox = f"_INBOX.waitfor.{secrets.token_hex(11)}"
    yield Send(f"SUB {inbox} 1\r\nPUB {JS_INFO} {inbox} 0\r\n\r\nPING\r\n".encode())
    while True:
        line = yield from read_line()
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
            data = (yield Read(sizes[-1] + 2))[:-2]
            yield Send(b"UNSUB 1\r\n")
            if verb == "HMSG":
                status = data[: sizes[0]].split(b"\r\n", 1)[0].decode("ascii", "replace")
                if " 503" in status:
                    return Outcome.down("JetStream is not enabled (no responders for $JS.API.INFO)")
                return Outcome.down(f"JetStream did not answer ({status.strip()})")
            return jetstream_verdict(data, detail)
        if verb == "PING":
            yield Send(b"PONG\r\n")
        elif verb == "-ERR":
            raise Refused(f"JetStream request refused: {error_text(line)}")
        elif verb not in ("+OK", "INFO", "PONG"):
            raise ProtocolError(f"unexpected answer to the JetStream request: {line[:40]!r}")


def jetstream_verdict(data: bytes, detail: str) -> Outcome:
    try:
        answer = loads(data)
    except TooDeep:
        return Outcome.down("JetStream answered with JSON nested too deeply")
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


def loads(text: str | bytes) -> Any:
    """The server's JSON; ValueError when it is not JSON, :class:`TooDeep` when nested too deep
    for the parser, which recurses (thousands of brackets would be a RecursionError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise TooDeep from None


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


def read_line() -> Generator[Step, bytes, str]:
    line = yield ReadLine(MAX_LINE)
    return line[:-2].decode("utf-8", errors="replace")


def error_text(line: str) -> str:
    """``-ERR 'Authorization Violation'`` -> ``authorization violation``."""
    return line[4:].strip().strip("'").lower() or "error without a message"


def describe_server(info: dict[str, Any]) -> str:
    version = info.get("version")
    return f"nats-server {version}" if isinstance(version, str) else "the NATS server"
