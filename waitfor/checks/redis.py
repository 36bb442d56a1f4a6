"""Redis: ready when ``PING`` answers ``+PONG``; RESP spoken natively, no client library.

``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]``, ``rediss://`` for TLS (verified; ``cacert=FILE``,
``insecure``).

- Credentials given: ``AUTH`` first (``AUTH USER PASSWORD`` with a user, for ACLs). A refused
  password is retried (it may be set after the server starts) and never printed.
- ``-LOADING`` (the dataset is still loading after a restart), ``-BUSY`` (a script runs),
  ``-MASTERDOWN`` (a replica that serves no stale data lost its primary), and any other error
  answer to PING: not ready, with the server's words.
- ``-NOAUTH`` without credentials: in ping mode the server is up, like pg_isready's answer to a
  server that asks for a password (``redis-cli ping`` prints the error instead of PONG); in query
  mode, or with ``key``/``role``, which must log in, it is a configuration error (exit 2).
- ``mode=query``: must log in (AUTH accepted, PING answered), and SELECT the URL's database.
- ``key=NAME``: ready once the key exists (EXISTS) in the URL's database.
- ``role=master``: ready only on a primary (``INFO replication`` says ``role:master``).
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar
from urllib.parse import unquote

from waitfor import redaction, tls, urls
from waitfor.checks import net
from waitfor.checks.base import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    describe_os_error,
    flag,
    host_port,
    reject_unknown,
    single,
)

DEFAULT_PORT = 6379
MODES = ("ping", "query")
ROLES = ("master",)
MAX_LINE = 64 * 1024  # a simple string or error; INFO replication is a bulk of ~1 KiB
MAX_BULK = 1024 * 1024
MAX_ITEMS = 1024

Reply = str | int | bytes | None | list["Reply"]


class RedisError(Exception):
    """An error answer (``-LOADING Redis is loading the dataset in memory``)."""

    @property
    def code(self) -> str:
        return str(self).split(" ", 1)[0]


class ProtocolError(Exception):
    """The peer does not speak RESP."""


@dataclass(frozen=True)
class RedisOptions:
    mode: str = "ping"
    key: str | None = None
    role: str | None = None
    insecure: bool = False
    cacert: str | None = None

    @property
    def logs_in(self) -> bool:
        return self.mode == "query" or self.key is not None or self.role is not None


class RedisCheck(Check):
    OPTION_NAMES = frozenset({"mode", "key", "role", "insecure", "cacert"})
    #: options named like secrets whose values are names: shown as written (redaction.options)
    PLAIN_OPTIONS: ClassVar[frozenset[str]] = frozenset({"key"})
    USAGE = (
        ("redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]", "PONG, as redis-cli ping (rediss:// TLS)"),
        ("redis://HOST#key=NAME&role=master", "logged in, the key exists, on a master"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        host = urls.host(parts)
        port = urls.port(parts, default=DEFAULT_PORT)
        if parts.query:
            raise ValueError("redis targets take no query parameters (options go after #)")
        database = parts.path.removeprefix("/")
        if database and not (database.isascii() and database.isdigit()):
            raise ValueError(f"the path is the database number, not {parts.path!r}")
        password = unquote(parts.password or "")
        userinfo = redaction.userinfo(parts.username, parts.password)
        if parts.password is None and parts.username:
            # redis://secret@host: redis-cli takes a lone userinfo as the password
            userinfo, password = f"{redaction.MASK}@", unquote(parts.username)
        user = unquote(parts.username or "") if parts.password is not None else ""
        display = f"{scheme}://{userinfo}{host_port(host, port)}"
        display += f"/{database}" if database else ""
        params = (("user", user), ("password", password), ("db", database or "0"))
        return Address(host, port, display, frozenset({password} - {""}), params)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> RedisOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode = (single(pairs, "mode") or "ping").lower()
        if mode not in MODES:
            raise ValueError(f"mode must be ping or query, not {mode!r}")
        key = single(pairs, "key")
        if key == "":
            raise ValueError("key needs a name")
        role = single(pairs, "role")
        if role is not None and role.lower() not in ROLES:
            raise ValueError(f"role must be master, not {role!r}")
        cacert = single(pairs, "cacert")
        if cacert is not None:
            tls.client_context(cafile=cacert)  # a file that is not PEM: exit 2 now
        return RedisOptions(
            mode=mode,
            key=key,
            role=role.lower() if role else None,
            insecure=flag(pairs, "insecure"),
            cacert=cacert,
        )

    @property
    def options(self) -> RedisOptions:
        assert isinstance(self.target.options, RedisOptions)
        return self.target.options

    @cached_property
    def _tls(self) -> ssl.SSLContext | None:
        if self.target.scheme != "rediss":
            return None
        return tls.client_context(verify=not self.options.insecure, cafile=self.options.cacert)

    async def probe(self, budget: float) -> Outcome:
        host, port = self.target.host, self.target.port or DEFAULT_PORT
        try:
            reader, writer = await net.open_stream(host, port, budget, tls=self._tls)
        except net.NetError as exc:
            return Outcome.down(str(exc))
        try:
            return await self._converse(_Resp(reader, writer))
        except ProtocolError as exc:
            return Outcome.down(str(exc))
        except (asyncio.IncompleteReadError, ConnectionError):
            return Outcome.down("server closed the connection")
        except OSError as exc:
            return Outcome.down(describe_os_error(exc))
        finally:
            writer.close()

    async def _converse(self, resp: _Resp) -> Outcome:
        params = dict(self.target.params)
        options = self.options
        refused = None
        if params["password"]:
            login = [params["user"], params["password"]] if params["user"] else [params["password"]]
            answer = await resp.call("AUTH", *login)
            if isinstance(answer, RedisError) and not _about_credentials(answer):
                return Outcome.down(str(answer))  # "max number of clients reached", ...
            if isinstance(answer, RedisError):
                refused = f"authentication failed: {answer}"
        pong = await resp.call("PING")
        if isinstance(pong, RedisError) and pong.code == "NOAUTH":
            if refused:
                return Outcome.down(refused)
            if options.logs_in:
                return Outcome.fatal(
                    "the server requires a password and none was given "
                    f"({self.target.scheme}://[USER]:PASSWORD@HOST)"
                )
            return Outcome.up("server is up (it requires a password: NOAUTH)")
        if isinstance(pong, RedisError):
            return Outcome.down(str(pong))
        if pong != "PONG":
            return Outcome.down(f"unexpected answer to PING: {_shown(pong)}")
        if not options.logs_in:
            return Outcome.up("PONG")
        if refused:
            return Outcome.down(refused)
        if params["db"] != "0":
            selected = await resp.call("SELECT", params["db"])
            if isinstance(selected, RedisError):
                return Outcome.down(f"SELECT {params['db']}: {selected}")
        if options.role == "master":
            info = await resp.call("INFO", "replication")
            if isinstance(info, RedisError) or not isinstance(info, bytes):
                return Outcome.down(f"INFO replication: {_shown(info)}")
            role = _info_field(info, "role")
            if role != "master":
                return Outcome.down(f"not a primary (role:{role}); waiting for role:master")
        if options.key is not None:
            exists = await resp.call("EXISTS", options.key)
            if isinstance(exists, RedisError):
                return Outcome.down(f"EXISTS: {exists}")
            if exists != 1:
                return Outcome.down(f"key {options.key!r} does not exist yet")
            return Outcome.up(f"key {options.key!r} exists")
        return Outcome.up("logged in, PONG")


class _Resp:
    """Just enough RESP2 for a handful of commands, with every length bounded."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    async def call(self, *words: str) -> Reply | RedisError:
        encoded = [word.encode() for word in words]
        self.writer.write(
            b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in encoded)
        )
        try:
            return await self._read()
        except RedisError as exc:
            return exc

    async def _read(self) -> Reply:
        line = await self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode("utf-8", "replace")
        if kind == b"-":
            raise RedisError(rest.decode("utf-8", "replace"))
        if kind == b":":
            return self._integer(rest)
        if kind == b"$":
            size = self._integer(rest)
            if size < 0:
                return None
            if size > MAX_BULK:
                raise ProtocolError("answer too large for a Redis health check")
            return (await self.reader.readexactly(size + 2))[:-2]
        if kind == b"*":
            count = self._integer(rest)
            if count > MAX_ITEMS:
                raise ProtocolError("answer too large for a Redis health check")
            return None if count < 0 else [await self._read() for _ in range(count)]
        raise ProtocolError(f"not a Redis server (it answered {_shown(line[:20])})")

    async def _line(self) -> bytes:
        try:
            line = await self.reader.readuntil(b"\r\n")
        except asyncio.LimitOverrunError:
            raise ProtocolError("not a Redis server (an endless line)") from None
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                answered = _shown(exc.partial[:20])
                raise ProtocolError(f"not a Redis server (it answered {answered})") from None
            raise
        if len(line) > MAX_LINE:
            raise ProtocolError("not a Redis server (an endless line)")
        return line[:-2]

    @staticmethod
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
