"""NATS: ``nats://[user[:password]@|token@]host[:port]``, ``tls://`` as the NATS clients spell it.

Spoken natively (see :mod:`.wire`): the server's ``INFO``, our ``CONNECT`` and ``PING``, its
``PONG``. TLS follows the clients: ``tls://`` insists on it, and ``nats://`` upgrades when the
server's INFO requires it.

``login`` (the default) is ready on ``PONG``. ``-ERR 'Authorization Violation'`` for credentials
that were given is retried (users appear late); a server that requires credentials when none
were given is a configuration error (exit 2). ``#jetstream`` also requires JetStream to answer a
``$JS.API.INFO`` request (on a random inbox), so an app that needs streams does not start against
a server without them. ``ping`` is ready on the server's ``INFO``: no credentials needed.
"""

from __future__ import annotations

from waitfor.kind import (
    MASK,
    Address,
    ConversationCheck,
    ConversationOptions,
    OptionPairs,
    flag,
    host_port,
    urls,
)
from waitfor.net import tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.net.conversation import Conversation


class NatsOptions(ConversationOptions):
    jetstream: bool = False


class NatsCheck(ConversationCheck[NatsOptions]):
    SERVER = "NATS"
    DEFAULT_PORT = 4222
    MODES = ("login", "ping")
    OPTION_NAMES = frozenset({"mode", "jetstream"}) | tls.OPTION_NAMES
    USAGE = (
        ("nats://[USER[:PASSWORD]@|TOKEN@]HOST[:PORT]", "CONNECT + PING answered by PONG"),
        ("tls://HOST#jetstream", "TLS; JetStream answers too"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        if "," in urls.split(url).netloc:  # the clients' server list: one target per server
            raise ValueError(
                "one server per target: list each server you need as a target of its own"
            )
        parts, host, port = cls.split_address(scheme, url)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(
                f"{scheme} targets are {scheme}://[user[:password]@|token@]host[:port]"
            )
        params: list[tuple[str, str]] = []
        user = parts.username
        if parts.password is not None:
            params.append(("user", urls.decoded(parts.username or "", "user")))
            params.append(("password", urls.decoded(parts.password, "password")))
        elif parts.username is not None:  # a lone userinfo is a token: all of it is secret
            params.append(("token", urls.decoded(parts.username, "token")))
            user = MASK
        secrets = frozenset(value for key, value in params if key != "user" and value)
        display = urls.shown(scheme, user, parts.password, host_port(host, port))
        return Address(host, port, display, secrets, tuple(params))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> NatsOptions:
        common = cls.parse_common(pairs)
        jetstream = flag(pairs, "jetstream")
        if jetstream and common.mode == "ping":
            raise ValueError("jetstream needs mode=login (a ping does not send requests)")
        return NatsOptions(common.mode, common.tls, jetstream)

    def conversation(self) -> Conversation:
        from waitfor.kinds.nats import wire  # the protocol only when probing

        options = self.options
        return wire.connect(
            dict(self.target.params),
            mode=options.mode,
            jetstream=options.jetstream,
            require_tls=self.target.scheme == "tls",  # upgraded after INFO, as the clients do
        )
