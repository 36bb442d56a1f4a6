"""MQTT: ``mqtt://[user[:password]@]host[:port]``, ``mqtts://`` for TLS.

Spoken natively (see :mod:`.wire`): ``CONNECT`` (MQTT 3.1.1, clean session, a random
``waitfor-`` client id, so a real client's session is never taken over), ``CONNACK``, then
``DISCONNECT``. 5.0 reason codes are
understood too (a 5.0-only broker answers a 3.1.1 CONNECT with them).

``login`` (the default) is ready on CONNACK 0. "Server unavailable" is not ready, and so are
credentials the broker refuses ("not authorized": users and ACLs often appear after the broker
does). A broker that refuses a client which gave no credentials at all is a configuration error
(exit 2): it demands credentials, and no amount of waiting will make the target carry them.
``ping`` is ready on any CONNACK but "server unavailable"/"server busy": the broker answers MQTT,
whatever it thinks of the login.
"""

from __future__ import annotations

from waitfor.kind import Address, ConversationCheck, ConversationOptions, host_port, urls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.net.conversation import Conversation


class MqttCheck(ConversationCheck[ConversationOptions]):
    SERVER = "MQTT"
    DEFAULT_PORT = 1883
    TLS_SCHEME, TLS_PORT = "mqtts", 8883
    MODES = ("login", "ping")
    USAGE = (
        ("mqtt://[USER[:PASSWORD]@]HOST[:PORT]", "CONNACK 0 (accepted); mqtts:// for TLS"),
        ("mqtt://HOST#mode=ping", "any CONNACK but server unavailable"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts, host, port = cls.split_address(scheme, url)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(f"{scheme} targets are {scheme}://[user[:password]@]host[:port]")
        params = []
        if parts.username is not None:
            params.append(("user", urls.decoded(parts.username, "user")))
        if parts.password is not None:
            params.append(("password", urls.decoded(parts.password, "password")))
        if any(len(value.encode()) > 0xFFFF for _, value in params):
            raise ValueError("MQTT user names and passwords are at most 65535 bytes")
        display = urls.shown(scheme, parts.username, parts.password, host_port(host, port))
        secrets = frozenset({parts.password} if parts.password else set())
        return Address(host, port, display, secrets, tuple(params))

    def conversation(self) -> Conversation:
        from waitfor.kinds.mqtt import wire  # the protocol only when probing

        credentials = (self.target.param("user"), self.target.param("password"))
        return wire.connect(credentials, self.options.mode)
