"""MQTT: ``mqtt://[user[:password]@]host[:port]``, ``mqtts://`` for TLS.

Spoken natively (see :mod:`.mqttwire`): ``CONNECT`` (MQTT 3.1.1, clean session, a random
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


class MqttOptions(Value):
    mode: str = "login"
    tls: tlsoptions.TlsOptions = tlsoptions.TlsOptions()


class MqttCheck(Check):
    OPTION_NAMES = frozenset({"mode"}) | tlsoptions.OPTION_NAMES
    USAGE: ClassVar[tuple[tuple[str, str], ...]] = (
        (
            "mqtt://[USER[:PASSWORD]@]HOST[:PORT], mqtts://…",
            "CONNACK 0 (accepted); #mode=ping: any CONNACK but server unavailable",
        ),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parts = urls.split(url)
        host = urls.host(parts)
        port = urls.port(parts, 8883 if scheme == "mqtts" else 1883)
        if parts.path not in ("", "/") or parts.query:
            raise ValueError(f"{scheme} targets are {scheme}://[user[:password]@]host[:port]")
        params = []
        if parts.username is not None:
            params.append(("user", urls.decoded(parts.username, "user")))
        if parts.password is not None:
            params.append(("password", urls.decoded(parts.password, "password")))
        if any(len(value.encode()) > 0xFFFF for _, value in params):
            raise ValueError("MQTT user names and passwords are at most 65535 bytes")
        userinfo = redaction.userinfo(parts.username, parts.password)
        display = f"{scheme}://{userinfo}{host_port(host, port)}"
        secrets = frozenset({parts.password} if parts.password else set())
        return Address(host, port, display, secrets, tuple(params))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> MqttOptions:
        reject_unknown(pairs, cls.OPTION_NAMES)
        mode = choice(pairs, "mode", MODES, "login")
        return MqttOptions(mode=mode, tls=tlsoptions.parse_tls_options(pairs))

    @cached_property
    def _tls(self) -> ssl.SSLContext | None:  # made once per target: loading CAs is not free
        options: MqttOptions = self.target.options  # type: ignore[assignment]
        return tlsoptions.client_context(options.tls) if self.target.scheme == "mqtts" else None

    async def probe(self, budget: float) -> Outcome:
        from waitfor.kinds.mqtt import wire  # the protocol, and asyncio, only when probing

        options: MqttOptions = self.target.options  # type: ignore[assignment]
        address = (self.target.host, self.target.port or 1883)
        credentials = (self.target.param("user"), self.target.param("password"))
        return await wire.probe(address, credentials, options.mode, self._tls, budget)

    def probe_now(self, budget: float) -> Outcome | None:
        if self.target.scheme == "mqtts":
            return None  # TLS is the runner's: the first attempt stays free of ssl
        from waitfor.kinds.mqtt import wire

        options: MqttOptions = self.target.options  # type: ignore[assignment]
        address = (self.target.host, self.target.port or 1883)
        credentials = (self.target.param("user"), self.target.param("password"))
        return wire.probe_now(address, credentials, options.mode, budget)
