"""Kafka: ``kafka://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]``, ``kafka+ssl://`` for TLS.

The host list is a bootstrap list, as clients take it: any one broker that answers will do (they
are asked at once). Spoken natively (see :mod:`.wire`): ApiVersions, then Metadata, asked with
``allow_auto_topic_creation`` false, so a broker with ``auto.create.topics.enable`` never creates
the topic a waiter asks about. Ready when Metadata lists at least one broker (``#brokers=N``: at
least N) and every ``#topic=NAME`` (repeatable) exists with a leader for each partition.

With credentials in the URL the connection logs in first (SASL ``PLAIN``, or ``#sasl=scram-sha-256``
/ ``scram-sha-512``; the SCRAM server's signature is checked too); a refused login is not ready
(users are often created after the broker starts). ``kafka+ssl://`` (Heroku's scheme; default port
9093) speaks TLS from the first byte, verified against the system's CAs, ``#cacert=FILE`` or
``#insecure``.
"""

from __future__ import annotations

from waitfor.kind import (
    Address,
    ConversationCheck,
    ConversationOptions,
    OptionPairs,
    Outcome,
    choice,
    seeds,
    single,
    urls,
)
from waitfor.net import tls

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.kind import Deadline
    from waitfor.net.conversation import Conversation

MECHANISMS = ("plain", "scram-sha-256", "scram-sha-512")


class KafkaOptions(ConversationOptions):
    brokers: int = 1
    topics: tuple[str, ...] = ()
    sasl: str = "plain"


class KafkaCheck(ConversationCheck[KafkaOptions]):
    SERVER = "Kafka"
    DEFAULT_PORT = 9092
    TLS_SCHEME, TLS_PORT = "kafka+ssl", 9093
    OPTION_NAMES = frozenset({"brokers", "topic", "sasl"}) | tls.OPTION_NAMES
    USAGE = (
        ("kafka://[USER:PASSWORD@]HOST[:PORT][,HOST[:PORT]...]", "a broker answers Metadata"),
        ("kafka+ssl://HOST#brokers=N&topic=NAME", "TLS; N brokers, the topic has leaders"),
    )

    @classmethod
    def parse_address(cls, scheme: str, url: str) -> Address:
        parsed = seeds.split(scheme, url, cls.default_port(scheme))
        if parsed.path not in ("", "/") or parsed.query:
            raise ValueError(f"{scheme} targets are {scheme}://[user:password@]host[:port][,...]")
        if (parsed.user is None) != (parsed.secret is None):
            raise ValueError("SASL needs both a user and a password (user:password@)")
        where = seeds.shown(parsed.seeds)
        display = urls.shown(scheme, parsed.username, parsed.password, where)
        params = [("seeds", seeds.as_param(parsed.seeds))]
        if parsed.user is not None and parsed.secret is not None:
            params += [("user", parsed.user), ("password", parsed.secret)]
        host, port = parsed.seeds[0]
        secrets = frozenset({parsed.password} if parsed.password else set())
        return Address(host, port, display, secrets, tuple(params))

    @classmethod
    def parse_options(cls, pairs: OptionPairs) -> KafkaOptions:
        common = cls.parse_common(pairs)
        count = single(pairs, "brokers") or "1"
        if not count.isascii() or not count.isdigit() or not 1 <= int(count) <= 10_000:
            raise ValueError(f"brokers must be a whole number from 1 to 10000, not {count!r}")
        topics = tuple(dict.fromkeys(value for key, value in pairs if key == "topic"))
        for topic in topics:
            # Kafka's own rule (Topic.validate): [a-zA-Z0-9._-], 1-249 characters
            if not 0 < len(topic) < 250 or topic in (".", "..") or not _legal(topic):
                raise ValueError(f"invalid topic name {topic!r}")
        sasl = choice(pairs, "sasl", MECHANISMS, "plain")
        return KafkaOptions(common.mode, common.tls, int(count), topics, sasl)

    @property
    def seeds(self) -> tuple[seeds.HostPort, ...]:
        return seeds.from_param(self.target.param("seeds") or "")

    def conversation(self) -> Conversation:
        from waitfor.kinds.kafka import wire  # the protocol only when probing

        user, password = self.target.param("user"), self.target.param("password")
        wanted = wire.Wanted(
            brokers=self.options.brokers,
            topics=self.options.topics,
            mechanism=self.options.sasl.upper() if user is not None else "",
            user=user or "",
            password=password or "",
        )
        return wire.check(wanted)

    async def probe(self, deadline: Deadline) -> Outcome:
        return await seeds.first_ready(
            self.seeds, lambda seed: self.probe_at(seed, self.conversation(), deadline)
        )

    def probe_now(self, deadline: Deadline) -> Outcome | None:
        return seeds.first_ready_now(self.seeds, self.probe_now_at, deadline)


def _legal(topic: str) -> bool:
    return topic.isascii() and all(c.isalnum() or c in "._-" for c in topic)
