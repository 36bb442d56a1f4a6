"""Redis: ready when ``PING`` answers ``+PONG``; RESP spoken natively, no client library.

``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]``, ``rediss://`` for TLS (verified; ``cacert=FILE``,
``insecure``; a client certificate ``cert=FILE&client-key=FILE``, as ``key`` names a Redis key).

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
- ``key=NAME&value=RE2``: and its value (a string; the first 64 KiB, GETRANGE) matches the RE2
  regex. The value is never quoted: it may be a token; the reason names the pattern only.
- ``role=master``: ready only on a primary (``INFO replication`` says ``role:master``).

The protocol itself (RESP) and the conversation live in :mod:`.wire`, imported when a probe runs.
"""

from __future__ import annotations

from waitfor.kind import (
    MASK,
    Address,
    ConversationCheck,
    ConversationOptions,
    OptionPairs,
    Outcome,
    host_port,
    single,
    urls,
)
from waitfor.net import tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from waitfor.kind import Deadline, Pattern
    from waitfor.net.conversation import Conversation

DEFAULT_PORT = 6379
MODES = ("ping", "query")
ROLES = ("master",)


class RedisOptions(ConversationOptions):
    key: str | None = None
    role: str | None = None
    value: Pattern | None = None  # the key's value must match

    @property
    def logs_in(self) -> bool:
        return self.mode == "query" or self.key is not None or self.role is not None


class RedisCheck(ConversationCheck[RedisOptions]):
    SERVER = "Redis"
    DEFAULT_PORT = DEFAULT_PORT
    TLS_SCHEME, TLS_PORT = "rediss", DEFAULT_PORT
    MODES = MODES
    OPTION_NAMES = frozenset({"mode", "key", "role", "value"}) | tls.OPTION_NAMES
    #: options named like secrets whose values are names: shown as written (redaction.options)
    PLAIN_OPTIONS: ClassVar[frozenset[str]] = frozenset({"key"}) | tls.PLAIN_OPTIONS
    TLS_KEY_OPTION = None  # key=NAME is a Redis key: the client key is client-key=FILE
    USAGE = (
        ("redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]", "PONG, as redis-cli ping (rediss:// TLS)"),
        ("redis://HOST#key=NAME&role=master", "logged in, the key exists, on a master"),
        ("redis://HOST#key=NAME&value=RE2", "the key's value (first 64 KiB) matches"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts, host, port = cls.split_address(scheme, url)
        if parts.query:
            raise ValueError("redis targets take no query parameters (options go after #)")
        database = parts.path.removeprefix("/")
        if database and not (database.isascii() and database.isdigit()):
            raise ValueError(f"the path is the database number, not {parts.path!r}")
        password = urls.decoded(parts.password or "", "password")
        shown_user = parts.username
        if parts.password is None and parts.username:
            # redis://secret@host: redis-cli takes a lone userinfo as the password
            shown_user, password = MASK, urls.decoded(parts.username, "password")
        user = urls.decoded(parts.username or "", "user") if parts.password is not None else ""
        where, path = host_port(host, port), f"/{database}" if database else ""
        display = urls.shown(scheme, shown_user, parts.password, where, path)
        params = (("user", user), ("password", password), ("db", database or "0"))
        return Address(host, port, display, frozenset({password} - {""}), params)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> RedisOptions:
        common = cls.parse_common(pairs)
        key = single(pairs, "key")
        if key == "":
            raise ValueError("key needs a name")
        role = single(pairs, "role")
        if role is not None and role.lower() not in ROLES:
            raise ValueError(f"role must be master, not {role!r}")
        value = single(pairs, "value")
        pattern = None
        if value is not None:
            if key is None:
                raise ValueError("value needs the key it is the value of: #key=NAME&value=RE2")
            from waitfor.kind import option_pattern

            pattern = option_pattern("value", value)
        role = role.lower() if role else None
        return RedisOptions(common.mode, common.tls, key, role, pattern)

    def conversation(self, value: list[bytes] | None = None) -> Conversation:
        """``value``: where the key's value is put, for the ``value=`` pattern to be matched
        after the conversation (a search may take long: not on the event loop)."""
        from waitfor.kinds.redis import wire  # the protocol only when probing

        options = self.options
        return wire.converse(
            dict(self.target.params),
            self.target.scheme,
            logs_in=options.logs_in,
            role=options.role,
            key=options.key,
            value=value,
        )

    async def probe(self, deadline: Deadline) -> Outcome:
        pattern = self.options.value
        if pattern is None:
            return await super().probe(deadline)
        value: list[bytes] = []
        outcome = await self.probe_at(self.address, self.conversation(value), deadline)
        if not outcome.ready or not value:
            return outcome
        return self.judged(outcome, await pattern.search(value[0]))

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        pattern = self.options.value
        if pattern is None:
            return super().probe_now(deadline)
        value: list[bytes] = []
        outcome = self.probe_now_at(self.address, deadline, self.conversation(value))
        if outcome is None or not outcome.ready or not value:
            return outcome
        judged = self.judged(outcome, pattern.search_now(value[0]))
        return judged if judged.ready else None

    def judged(self, outcome: Outcome, matches: bool) -> Outcome:
        """The conversation's ready outcome, and whether the value matched."""
        assert self.options.value is not None
        said = f"its value matches {self.options.value.pattern!r}"
        if matches:
            return Outcome.up(f"{outcome.reason}, {said}")
        return Outcome.down(f"{outcome.reason}, but {said.replace('matches', 'does not match')}")
