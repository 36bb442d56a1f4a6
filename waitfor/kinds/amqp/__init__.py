"""AMQP 0-9-1 (RabbitMQ): ``amqp://[user[:password]@]host[:port][/vhost]``, ``amqps://`` for TLS.

The connection handshake is spoken natively (no client library, see :mod:`.amqpwire`): the header,
``Connection.Start``/``Start-Ok`` (PLAIN), ``Tune``/``Tune-Ok``, ``Open``/``Open-Ok`` and, once the
answer is known, ``Close``/``Close-Ok``, so the broker's connection list keeps nothing behind.

``login`` (the default) is ready when the URL's credentials (guest/guest when absent, as every AMQP
client assumes) open the vhost: a refused login is retried ("authentication failed": users are often
created by definitions after boot) and so is a vhost that does not exist yet. ``ping`` is ready
when the broker answers the protocol header with ``Connection.Start``: no credentials needed, but
it cannot see users, vhosts or permissions, and since AMQP has no way to leave before logging in,
RabbitMQ logs each ping as a connection closed during the handshake.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from waitfor import redaction, urls
from waitfor.kind import (
    Address,
    Check,
    OptionPairs,
    Outcome,
    choice,
    host_port,
    reject_unknown,
)
from waitfor.net import tlsoptions
from waitfor.values import Value

if TYPE_CHECKING:
    import ssl

MODES = ("login", "ping")
DEFAULT_CREDENTIAL = "guest"


class AmqpOptions(Value):
    mode: str = "login"
    tls: tlsoptions.TlsOptions = tlsoptions.TlsOptions()


class AmqpCheck(Check):
    OPTION_NAMES = frozenset({"mode"}) | tlsoptions.OPTION_NAMES
    USAGE: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "amqp://[USER[:PASSWORD]@]HOST[:PORT][/VHOST], amqps://…",
            "a login (default guest/guest) opens the vhost; #mode=ping: the broker answers",
        ),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        host = urls.host(parts)
        port = urls.port(parts, 5671 if scheme == "amqps" else 5672)
        path = parts.path.removeprefix("/")
        if "/" in path:
            raise ValueError("a vhost containing '/' must be percent-encoded (%2F)")
        vhost = urls.decoded(path, "vhost") if path else "/"
        if len(vhost.encode()) > 255:
            raise ValueError("vhost name longer than 255 bytes")
        # as the clients do: each part that is absent is guest
        user = (
            DEFAULT_CREDENTIAL if parts.username is None else urls.decoded(parts.username, "user")
        )
        password = DEFAULT_CREDENTIAL
        if parts.password is not None:
            password = urls.decoded(parts.password, "password")
        # query parameters are client settings (heartbeat=30, ...): accepted, shown, not used
        display = f"{scheme}://{redaction.userinfo(parts.username, parts.password)}"
        display += host_port(host, port) + parts.path
        display += f"?{redaction.query(parts.query)}" if parts.query else ""
        secrets = frozenset({password} if parts.password else set())
        params = (("user", user), ("password", password), ("vhost", vhost))
        return Address(host, port, display, secrets, params)

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> AmqpOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode = choice(pairs, "mode", MODES, "login")
        return AmqpOptions(mode=mode, tls=tlsoptions.parse_tls_options(pairs))

    @cached_property
    def _tls(self) -> ssl.SSLContext | None:  # made once per target: loading CAs is not free
        options: AmqpOptions = self.target.options  # type: ignore[assignment]
        return tlsoptions.client_context(options.tls) if self.target.scheme == "amqps" else None

    async def probe(self, budget: float) -> Outcome:
        from waitfor.kinds.amqp import wire  # the protocol, and asyncio, only when probing

        options: AmqpOptions = self.target.options  # type: ignore[assignment]
        address = (self.target.host, self.target.port or 5672)
        return await wire.probe(address, dict(self.target.params), options.mode, self._tls, budget)

    def probe_now(self, budget: float) -> Outcome | None:
        if self.target.scheme == "amqps":
            return None  # TLS is the runner's: the first attempt stays free of ssl
        from waitfor.kinds.amqp import wire

        options: AmqpOptions = self.target.options  # type: ignore[assignment]
        address = (self.target.host, self.target.port or 5672)
        return wire.probe_now(address, dict(self.target.params), options.mode, budget)
