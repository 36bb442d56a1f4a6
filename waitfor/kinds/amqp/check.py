"""AMQP 0-9-1 (RabbitMQ): ``amqp://[user[:password]@]host[:port][/vhost]``, ``amqps://`` for TLS.

The connection handshake is spoken natively (no client library, see :mod:`.wire`): the header,
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

from waitfor.kind import Address, ConversationCheck, ConversationOptions, host_port, urls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.net.conversation import Conversation

DEFAULT_CREDENTIAL = "guest"


class AmqpCheck(ConversationCheck[ConversationOptions]):
    SERVER = "AMQP"
    DEFAULT_PORT = 5672
    TLS_SCHEME, TLS_PORT = "amqps", 5671
    MODES = ("login", "ping")
    USAGE = (
        (
            "amqp://[USER[:PASSWORD]@]HOST[:PORT][/VHOST]",
            "a login (default guest/guest) opens the vhost",
        ),
        ("amqps://...#mode=ping", "TLS; the broker answers, no login"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts, host, port = cls.split_address(scheme, url)
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
        where = host_port(host, port)
        display = urls.shown(scheme, parts.username, parts.password, where, parts.path, parts.query)
        secrets = frozenset({password} if parts.password else set())
        params = (("user", user), ("password", password), ("vhost", vhost))
        return Address(host, port, display, secrets, params)

    def conversation(self) -> Conversation:
        from waitfor.kinds.amqp import wire  # the protocol only when probing

        return wire.handshake(dict(self.target.params), self.options.mode)
