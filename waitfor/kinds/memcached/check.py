"""memcached: ready when ``version`` answers ``VERSION …`` (text protocol, spoken natively).

``memcached://[USER:PASSWORD@]HOST[:PORT]`` (port 11211). ``version`` goes first; only a server
that refuses it as unauthenticated (started with ``-Y authfile``) gets the text protocol's login,
whose refusal is retried and never printed. Without credentials, such a server is up, as a
PostgreSQL server that asks for a password is up for pg_isready. Credentials are never sent to a
server without authentication: there the login is a plain ``set`` that would store them.

The protocol itself lives in :mod:`.wire`, imported when a probe runs.
"""

from __future__ import annotations

from waitfor.kind import Address, ConversationCheck, ConversationOptions, host_port, urls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.net.conversation import Conversation

DEFAULT_PORT = 11211


class MemcachedCheck(ConversationCheck[ConversationOptions]):
    SERVER = "memcached"
    DEFAULT_PORT = DEFAULT_PORT
    OPTION_NAMES = frozenset()  # no modes, no TLS: the text protocol has neither
    USAGE = (("memcached://[USER:PASSWORD@]HOST[:PORT]", "version answers VERSION ..."),)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts, host, port = cls.split_address(scheme, url)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError("memcached targets are memcached://[USER:PASSWORD@]HOST[:PORT]")
        if (parts.username is None) != (parts.password is None):
            raise ValueError("memcached credentials are USER:PASSWORD, both or neither")
        user = urls.decoded(parts.username or "", "user")
        password = urls.decoded(parts.password or "", "password")
        if " " in user or " " in password or "\n" in user + password:
            raise ValueError("memcached user and password cannot contain spaces")
        display = urls.shown(scheme, parts.username, parts.password, host_port(host, port))
        secrets = frozenset({password} - {""})
        return Address(host, port, display, secrets, (("user", user), ("password", password)))

    def conversation(self) -> Conversation:
        from waitfor.kinds.memcached import wire  # the protocol only when probing

        return wire.version(*self._credentials)

    @property
    def _credentials(self) -> tuple[str, str]:
        """(user, password); a user of "" means no login."""
        params = dict(self.target.params)
        return params["user"], params["password"]
