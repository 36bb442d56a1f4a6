"""NATS: ``nats://[user[:password]@|token@]host[:port]``, ``tls://`` as the NATS clients spell it.

Spoken natively (see :mod:`.natswire`): the server's ``INFO``, our ``CONNECT`` and ``PING``, its
``PONG``. TLS follows the clients: ``tls://`` insists on it, and ``nats://`` upgrades when the
server's INFO requires it.

``login`` (the default) is ready on ``PONG``. ``-ERR 'Authorization Violation'`` for credentials
that were given is retried (users appear late); a server that requires credentials when none
were given is a configuration error (exit 2). ``#jetstream`` also requires JetStream to answer a
``$JS.API.INFO`` request (on a random inbox), so an app that needs streams does not start against
a server without them. ``ping`` is ready on the server's ``INFO``: no credentials needed.
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
    flag,
    host_port,
    reject_unknown,
)
from waitfor.net import tlsoptions
from waitfor.values import Value

if TYPE_CHECKING:
    import ssl

MODES = ("login", "ping")


class NatsOptions(Value):
    mode: str = "login"
    jetstream: bool = False
    tls: tlsoptions.TlsOptions = tlsoptions.TlsOptions()


class NatsCheck(Check):
    OPTION_NAMES = frozenset({"mode", "jetstream"}) | tlsoptions.OPTION_NAMES
    USAGE: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "nats://[USER[:PASSWORD]@|TOKEN@]HOST[:PORT], tls://…",
            "CONNECT + PING answered by PONG; #jetstream: JetStream answers too",
        ),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        if "," in parts.netloc:  # the clients' server list: each server is a target of its own
            raise ValueError(
                "one server per target: list each server you need as a target of its own"
            )
        host = urls.host(parts)
        port = urls.port(parts, 4222)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(
                f"{scheme} targets are {scheme}://[user[:password]@|token@]host[:port]"
            )
        params: list[tuple[str, str]] = []
        userinfo = redaction.userinfo(parts.username, parts.password)
        if parts.password is not None:
            params.append(("user", urls.decoded(parts.username or "", "user")))
            params.append(("password", urls.decoded(parts.password, "password")))
        elif parts.username is not None:  # a lone userinfo is a token: all of it is secret
            params.append(("token", urls.decoded(parts.username, "token")))
            userinfo = f"{redaction.MASK}@"
        secrets = frozenset(value for key, value in params if key != "user" and value)
        display = f"{scheme}://{userinfo}{host_port(host, port)}"
        return Address(host, port, display, secrets, tuple(params))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> NatsOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode = choice(pairs, "mode", MODES, "login")
        jetstream = flag(pairs, "jetstream")
        if jetstream and mode == "ping":
            raise ValueError("jetstream needs mode=login (a ping does not send requests)")
        return NatsOptions(mode, jetstream, tlsoptions.parse_tls_options(pairs))

    @cached_property
    def _tls(self) -> ssl.SSLContext:  # made once per target: loading CAs is not free
        options: NatsOptions = self.target.options  # type: ignore[assignment]
        return tlsoptions.client_context(options.tls)

    async def probe(self, budget: float) -> Outcome:
        from waitfor.kinds.nats import wire  # the protocol, and asyncio, only when probing

        options: NatsOptions = self.target.options  # type: ignore[assignment]
        return await wire.probe(
            (self.target.host, self.target.port or 4222),
            dict(self.target.params),
            mode=options.mode,
            jetstream=options.jetstream,
            require_tls=self.target.scheme == "tls",
            tls=lambda: self._tls,
            budget=budget,
        )

    def probe_now(self, budget: float) -> Outcome | None:
        if self.target.scheme == "tls":
            return None  # TLS is the runner's: the first attempt stays free of ssl
        from waitfor.kinds.nats import wire

        options: NatsOptions = self.target.options  # type: ignore[assignment]
        return wire.probe_now(
            (self.target.host, self.target.port or 4222),
            dict(self.target.params),
            mode=options.mode,
            jetstream=options.jetstream,
            budget=budget,
        )
