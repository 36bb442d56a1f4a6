"""memcached's text protocol on the wire: ``version``, with a login first if the server asks."""

from __future__ import annotations

from collections.abc import Generator

from waitfor.kind import Outcome, answer_line
from waitfor.net.conversation import Conversation, Send, Step

MAX_LINE = 4096  # "VERSION 1.6.18" or an error: anything longer is not memcached


def version(user: str, password: str) -> Conversation:
    """Ask ``version``; log in only when the server refuses it as unauthenticated (user "" for no
    credentials), then ask again.

    The text protocol's login is ``set auth``: on a server without authentication that is an
    ordinary set, which would store the credentials in the cache for every client to read. So
    ``version`` (which stores nothing) goes first and tells whether the server wants a login at
    all; credentials given to a server that wants none are not sent, and the server is ready (any
    client, the app's included, is served), saying so.
    """
    yield Send(b"version\r\n")
    answer = yield from read_line()
    if answer == "CLIENT_ERROR unauthenticated":
        if not user:
            return Outcome.up("server is up (it requires authentication)")
        login = f"{user} {password}".encode()
        yield Send(b"set auth 0 0 %d\r\n%s\r\n" % (len(login), login))
        answer = yield from read_line()
        if answer != "STORED":
            return Outcome.down(f"authentication failed: {answer}")
        yield Send(b"version\r\n")
        answer = yield from read_line()
    elif user and answer.startswith("VERSION "):
        return Outcome.up(f"{answer} (authentication is off: the credentials were not sent)")
    if answer.startswith("VERSION "):
        return Outcome.up(answer)
    if answer.startswith(("SERVER_ERROR", "CLIENT_ERROR", "ERROR")):
        return Outcome.down(answer)
    return Outcome.down(f"not a memcached server (it answered {answer[:40]!r})")


def read_line() -> Generator[Step, bytes, str]:
    """One answer line, printable, without its CRLF."""
    return _printable((yield from answer_line(MAX_LINE, _not_memcached)))


def _not_memcached(answer: bytes) -> str:
    return f"not a memcached server (it answered {_printable(answer[:40])!r})"


def _printable(data: bytes) -> str:
    return "".join(c if c.isprintable() else "?" for c in data.decode("utf-8", "replace"))
