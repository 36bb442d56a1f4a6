"""RESP2, just enough of it for a readiness check, and the conversation a redis:// probe has.

Imported only when a probe runs; the front module (:mod:`waitfor.kinds.redis.check`) parses targets
without it.
"""

from __future__ import annotations

from collections.abc import Generator

from waitfor.kind import Outcome, ProtocolError, answer_line
from waitfor.net.conversation import Conversation, Read, Send, Step

MAX_LINE = 64 * 1024  # a simple string or error; INFO replication is a bulk of ~1 KiB
MAX_BULK = 1024 * 1024
MAX_ITEMS = 1024
MAX_DEPTH = 8  # nested arrays; each level is a generator frame
#: a ``value=`` pattern is matched against this much of the key's value
VALUE_BYTES = 64 * 1024

Reply = str | int | bytes | None | list["Reply"]


class RedisError(Exception):
    """An error answer (``-LOADING Redis is loading the dataset in memory``)."""

    @property
    def code(self) -> str:
        return str(self).split(" ", 1)[0]


def converse(
    params: dict[str, str],
    scheme: str,
    *,
    logs_in: bool,
    role: str | None,
    key: str | None,
    value: list[bytes] | None = None,
) -> Conversation:
    """The exchange: AUTH when there is a password, PING, and, logged in, the role and the key
    asked for (``logs_in``: a query, or a role or key to check); ``value`` receives the first
    VALUE_BYTES of the key's value (a string), for its pattern to be matched by the caller."""
    refused = None
    if params["password"]:
        login = [params["user"], params["password"]] if params["user"] else [params["password"]]
        answer = yield from call("AUTH", *login)
        if isinstance(answer, RedisError) and not _about_credentials(answer):
            return Outcome.down(str(answer))  # "max number of clients reached", ...
        if isinstance(answer, RedisError):
            refused = f"authentication failed: {answer}"
    pong = yield from call("PING")
    if isinstance(pong, RedisError) and pong.code == "NOAUTH":
        if refused:
            return Outcome.down(refused)
        if logs_in:
            return Outcome.fatal(
                "the server requires a password and none was given "
                f"({scheme}://[USER]:PASSWORD@HOST)"
            )
        return Outcome.up("server is up (it requires a password: NOAUTH)")
    if isinstance(pong, RedisError):
        return Outcome.down(str(pong))
    if pong != "PONG":
        return Outcome.down(f"unexpected answer to PING: {_shown(pong)}")
    if not logs_in:
        return Outcome.up("PONG")
    if refused:
        return Outcome.down(refused)
    if params["db"] != "0":
        selected = yield from call("SELECT", params["db"])
        if isinstance(selected, RedisError):
            return Outcome.down(f"SELECT {params['db']}: {selected}")
    checked = []  # what ready rests on besides the login, named in the detail
    if role == "master":
        info = yield from call("INFO", "replication")
        if isinstance(info, RedisError) or not isinstance(info, bytes):
            return Outcome.down(f"INFO replication: {_shown(info)}")
        actual = _info_field(info, "role")
        if actual != "master":
            return Outcome.down(f"not a primary (role:{actual}); waiting for role:master")
        checked.append("role master")
    if key is not None:
        exists = yield from call("EXISTS", key)
        if isinstance(exists, RedisError):
            return Outcome.down(f"EXISTS: {exists}")
        if exists != 1:
            return Outcome.down(f"key {key!r} does not exist yet")
        if value is not None:
            # GETRANGE, not GET: a value of any size costs VALUE_BYTES at most
            head = yield from call("GETRANGE", key, "0", str(VALUE_BYTES - 1))
            if isinstance(head, RedisError) and head.code == "WRONGTYPE":
                return Outcome.down(f"key {key!r} holds no string value (WRONGTYPE)")
            if isinstance(head, RedisError):
                return Outcome.down(f"GETRANGE: {head}")
            if not isinstance(head, bytes):
                return Outcome.down("unexpected answer to GETRANGE (not a string)")
            value.append(head)
        return Outcome.up(", ".join([*checked, f"key {key!r} exists"]))
    # "logged in" only when AUTH was sent: without a password it is the default user's PING
    said = "logged in, PONG" if params["password"] else "PONG"
    return Outcome.up(", ".join([said, *checked]))


# --- just enough RESP2 for a handful of commands, with every length bounded --------------------


def call(*words: str) -> Generator[Step, bytes, Reply | RedisError]:
    """Send one command; its answer, an error answer returned rather than raised."""
    encoded = [word.encode() for word in words]
    yield Send(
        b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in encoded)
    )
    try:
        return (yield from read_reply())
    except RedisError as exc:
        return exc


def read_reply(depth: int = 0) -> Generator[Step, bytes, Reply]:
    if depth > MAX_DEPTH:  # the commands asked for nest one level at most
        raise ProtocolError("answer nested too deeply for a Redis health check")
    line = yield from answer_line(MAX_LINE, _not_redis)
    kind, rest = line[:1], line[1:]
    if kind == b"+":
        return rest.decode("utf-8", "replace")
    if kind == b"-":
        raise RedisError(rest.decode("utf-8", "replace"))
    if kind == b":":
        return _integer(rest)
    if kind == b"$":
        size = _integer(rest)
        if size < 0:
            return None
        if size > MAX_BULK:
            raise ProtocolError("answer too large for a Redis health check")
        return (yield Read(size + 2))[:-2]
    if kind == b"*":
        count = _integer(rest)
        if count > MAX_ITEMS:
            raise ProtocolError("answer too large for a Redis health check")
        if count < 0:
            return None
        items: list[Reply] = []
        for _ in range(count):
            items.append((yield from read_reply(depth + 1)))
        return items
    raise ProtocolError(_not_redis(line))


def _not_redis(answer: bytes) -> str:
    return f"not a Redis server (it answered {_shown(answer[:20])})"


def _integer(text: bytes) -> int:
    try:
        return int(text)
    except ValueError:
        raise ProtocolError(f"not a Redis server (bad number {_shown(text[:20])})") from None


def _about_credentials(error: RedisError) -> bool:
    """WRONGPASS, "invalid password", "AUTH <password> called without any password configured"
    and the like: an answer about the login, not the server's state."""
    return error.code == "WRONGPASS" or "password" in str(error).lower()


def _info_field(info: bytes, name: str) -> str:
    for line in info.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(":")
        if key == name:
            return value.strip()
    return "unknown"


def _shown(value: object) -> str:
    """An unexpected answer, short and printable."""
    text = value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)
    text = "".join(c if c.isprintable() else "?" for c in text[:60])
    return repr(text)
