"""memcached: ready when ``version`` answers ``VERSION …`` (text protocol, spoken natively).

``memcached://[USER:PASSWORD@]HOST[:PORT]`` (port 11211). With credentials, the text protocol's
authentication (a server started with ``-Y authfile``) comes first: a refused login is retried and
never printed. Without credentials, a server that wants them (``CLIENT_ERROR unauthenticated``) is
up, as a PostgreSQL server that asks for a password is up for pg_isready.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from waitfor import redaction, urls
from waitfor.checks.base import Address, Check, Outcome, describe_os_error, host_port

if TYPE_CHECKING:
    import asyncio

DEFAULT_PORT = 11211
MAX_LINE = 4096  # "VERSION 1.6.18" or an error: anything longer is not memcached


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
        import asyncio  # not imported when a target is only parsed

        from waitfor.checks import net

        host, port = self.target.host, self.target.port or DEFAULT_PORT
        try:
            reader, writer = await net.open_stream(host, port, budget)
        except net.NetError as exc:
            return Outcome.down(str(exc))
        try:
            params = dict(self.target.params)
            if params["user"]:
                # The text protocol's login: a "set" whose value is "USER PASSWORD".
                login = f"{params['user']} {params['password']}".encode()
                writer.write(b"set auth 0 0 %d\r\n%s\r\n" % (len(login), login))
                answer = await _line(reader)
                if answer != "STORED":
                    return Outcome.down(f"authentication failed: {answer}")
            writer.write(b"version\r\n")
            answer = await _line(reader)
            if answer.startswith("VERSION "):
                return Outcome.up(answer)
            if answer == "CLIENT_ERROR unauthenticated":
                return Outcome.up("server is up (it requires authentication)")
            if answer.startswith(("SERVER_ERROR", "CLIENT_ERROR", "ERROR")):
                return Outcome.down(answer)
            return Outcome.down(f"not a memcached server (it answered {answer[:40]!r})")
        except NotMemcached as exc:
            return Outcome.down(f"not a memcached server (it answered {exc})")
        except (asyncio.IncompleteReadError, ConnectionError):
            return Outcome.down("server closed the connection")
        except OSError as exc:
            return Outcome.down(describe_os_error(exc))
        finally:
            writer.close()


class NotMemcached(Exception):
    """The peer answered, but not in memcached's text protocol."""


async def _line(reader: asyncio.StreamReader) -> str:
    import asyncio

    try:
        line = await reader.readuntil(b"\r\n")
    except asyncio.LimitOverrunError:
        raise NotMemcached("an endless line") from None
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise
        raise NotMemcached(repr(_printable(exc.partial[:40]))) from None
    if len(line) > MAX_LINE:
        raise NotMemcached("an endless line")
    return _printable(line[:-2])


def _printable(data: bytes) -> str:
    return "".join(c if c.isprintable() else "?" for c in data.decode("utf-8", "replace"))
