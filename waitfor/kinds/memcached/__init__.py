"""memcached: ready when ``version`` answers ``VERSION …`` (text protocol, spoken natively).

``memcached://[USER:PASSWORD@]HOST[:PORT]`` (port 11211). ``version`` goes first; only a server
that refuses it as unauthenticated (started with ``-Y authfile``) gets the text protocol's login,
whose refusal is retried and never printed. Without credentials, such a server is up, as a
PostgreSQL server that asks for a password is up for pg_isready. Credentials are never sent to a
server without authentication: there the login is a plain ``set`` that would store them.

The protocol itself lives in :mod:`.memcachedwire`, imported when a probe runs.
"""

from __future__ import annotations

from waitfor import redaction, urls
from waitfor.kind import Address, Check, Outcome, host_port

DEFAULT_PORT = 11211


class MemcachedCheck(Check):
    USAGE = (("memcached://[USER:PASSWORD@]HOST[:PORT]", "version answers VERSION ..."),)

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        host = urls.host(parts)
        port = urls.port(parts, default=DEFAULT_PORT)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError("memcached targets are memcached://[USER:PASSWORD@]HOST[:PORT]")
        if (parts.username is None) != (parts.password is None):
            raise ValueError("memcached credentials are USER:PASSWORD, both or neither")
        user = urls.decoded(parts.username or "", "user")
        password = urls.decoded(parts.password or "", "password")
        if " " in user or " " in password or "\n" in user + password:
            raise ValueError("memcached user and password cannot contain spaces")
        userinfo = redaction.userinfo(parts.username, parts.password)
        display = f"{scheme}://{userinfo}{host_port(host, port)}"
        secrets = frozenset({password} - {""})
        return Address(host, port, display, secrets, (("user", user), ("password", password)))

    async def probe(self, budget: float) -> Outcome:
        from waitfor.kinds.memcached import wire  # the protocol only when probing

        return await wire.probe(self._address, *self._credentials, budget)

    def probe_now(self, budget: float) -> Outcome | None:
        from waitfor.kinds.memcached import wire

        return wire.probe_now(self._address, *self._credentials, budget)

    @property
    def _address(self) -> tuple[str, int]:
        return self.target.host, self.target.port or DEFAULT_PORT

    @property
    def _credentials(self) -> tuple[str, str]:
        """(user, password); a user of "" means no login."""
        params = dict(self.target.params)
        return params["user"], params["password"]
