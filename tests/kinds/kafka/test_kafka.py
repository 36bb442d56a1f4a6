"""Kafka against librdkafka's mock cluster (a stand-in: no Apache Kafka runs here), with
confluent-kafka's AdminClient as the oracle, and against scripted brokers for SASL and hostility."""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient

from tests.support.attempts import assert_first_attempt_as_runner, probe
from tests.support.fast import FAST
from tests.support.kafkamock import MockCluster, mock_cluster
from tests.support.servers import scripted_peer
from tests.support.targets import refusals
from waitfor import parse_target, wait_for
from waitfor.kind import Outcome
from waitfor.kinds.kafka import scram, wire


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with mock_cluster(3) as made:
        yield made


def oracle(bootstraps: str, brokers: int = 1, topics: tuple[str, ...] = ()) -> bool:
    """What confluent-kafka concludes: Metadata answers, enough brokers, the topics led."""
    admin = AdminClient({"bootstrap.servers": bootstraps, "allow.auto.create.topics": False})
    try:
        metadata = admin.list_topics(timeout=5)
    except Exception:
        return False
    if len(metadata.brokers) < brokers:
        return False
    for name in topics:
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            return False
        if any(p.leader < 0 or p.error is not None for p in topic.partitions.values()):
            return False
    return True


def agree(
    cluster: MockCluster, fragment: str = "", brokers: int = 1, topics: tuple[str, ...] = ()
) -> Outcome:
    url = f"kafka://{cluster.bootstraps}{fragment}"
    outcome = probe(url)
    assert outcome.ready == oracle(cluster.bootstraps, brokers, topics), outcome
    return outcome


@pytest.mark.parametrize(
    ("url", "shown", "seeds"),
    [
        ("kafka://broker", "kafka://broker:9092", "broker 9092"),
        ("kafka+ssl://broker", "kafka+ssl://broker:9093", "broker 9093"),
        ("kafka://a:1,b,[::1]:3", "kafka://a:1,b:9092,[::1]:3", "a 1,b 9092,::1 3"),
        ("kafka://app:s3cr%40t@a:1,b:2/", "kafka://app:***@a:1,b:2", "a 1,b 2"),
    ],
)
def test_address(url: str, shown: str, seeds: str) -> None:
    target = parse_target(url)
    assert (target.kind, str(target), target.param("seeds")) == ("kafka", shown, seeds)
    if "s3cr" in url:
        assert target.param("password") == "s3cr@t"
        assert "s3cr" not in str(target)


test_bad_targets_are_refused = refusals(
    [
        ("kafka://a/topic", "kafka targets are"),
        ("kafka://a?x=1", "kafka targets are"),
        ("kafka://a,,b", "empty host"),
        ("kafka://a,b:x", "invalid port"),
        ("kafka://a:99999", "invalid port"),
        ("kafka://user@a", "both a user and a password"),
        ("kafka://a#brokers=0", "brokers must be"),
        ("kafka://a#topic=no/slash", "invalid topic name"),
        ("kafka://a#sasl=gssapi", "sasl must be"),
        ("kafka+ssl://a#cacert=/nonexistent", "does not exist"),
    ]
)


def test_ready_agrees_with_confluent_kafka(cluster: MockCluster) -> None:
    assert agree(cluster).reason.startswith("3 brokers, cluster ")
    assert agree(cluster, "#brokers=3", 3).ready
    assert agree(cluster, "#brokers=4", 4).reason == "3 of 4 brokers"
    assert agree(cluster, "#topic=orders", topics=("orders",)).reason == (
        "topic 'orders' does not exist"
    )
    cluster.create_topic("orders", partitions=4, replication=2)
    assert agree(cluster, "#topic=orders", topics=("orders",)).ready
    cluster.set_leader("orders", 2, -1)  # a partition without a leader
    outcome = agree(cluster, "#topic=orders&brokers=2", 2, ("orders",))
    assert outcome.reason == "topic 'orders' partition 2: no leader"
    cluster.set_leader("orders", 2, 1)
    assert agree(cluster, "#topic=orders&brokers=2", 2, ("orders",)).ready


def test_asking_creates_no_topic(cluster: MockCluster) -> None:
    """Metadata with allow_auto_topic_creation false: the mock cluster auto-creates otherwise."""
    for _ in range(3):
        assert not probe(f"kafka://{cluster.bootstraps}#topic=ghost").ready
    admin = AdminClient({"bootstrap.servers": cluster.bootstraps})
    assert "ghost" not in admin.list_topics(timeout=5).topics


def test_a_topic_created_later(cluster: MockCluster) -> None:
    timer = threading.Timer(1.0, cluster.create_topic, ("events", 2, 1))
    timer.start()
    try:
        started = time.monotonic()
        [result] = wait_for(f"kafka://{cluster.bootstraps}#topic=events", timeout=20, backoff=FAST)
    finally:
        timer.cancel()
    assert result.reason.startswith("3 brokers, 1 topic(s) with 2 partition(s) led")
    assert time.monotonic() - started >= 0.9


def test_brokers_going_down_and_up(cluster: MockCluster) -> None:
    first = cluster.addresses[0]
    cluster.broker_down(1)
    assert not probe(f"kafka://{first}").ready  # the only bootstrap broker is down
    assert not oracle(first)
    # the others still answer, and no longer list it
    assert agree(cluster, "#brokers=2", 2).reason.startswith("2 brokers")
    assert not agree(cluster, "#brokers=3", 3).ready
    threading.Timer(1.0, cluster.broker_up, (1,)).start()
    [result] = wait_for(f"kafka://{first}#brokers=3", timeout=20, backoff=FAST)
    assert result.reason.startswith("3 brokers")


@pytest.mark.parametrize("highest", [4, 8, 9, 12])
def test_every_metadata_version(cluster: MockCluster, highest: int) -> None:
    cluster.create_topic("t", 3, 1)
    cluster.api_versions(wire.API_METADATA, 0, highest)
    assert probe(f"kafka://{cluster.bootstraps}#topic=t&brokers=3").ready


def test_a_broker_without_metadata_v4(cluster: MockCluster) -> None:
    cluster.api_versions(wire.API_METADATA, 0, 3)
    assert probe(f"kafka://{cluster.bootstraps}").reason == (
        "the broker offers Metadata v0-v3, not v4-v12"
    )


def test_first_attempt_as_runner(cluster: MockCluster) -> None:
    cluster.create_topic("t", 1, 1)
    url = f"kafka://127.0.0.1:1,{cluster.bootstraps}"
    assert_first_attempt_as_runner(
        [url, f"{url}#topic=t"], [f"{url}#topic=nope", "kafka://127.0.0.1:1"]
    )


# --- scripted brokers: SASL, and peers no real broker imitates ---


def frame(correlation: int, body: bytes, flexible: bool = False) -> bytes:
    payload = struct.pack("!i", correlation) + (b"\0" if flexible else b"") + body
    return struct.pack("!i", len(payload)) + payload


def read_request(conn: socket.socket) -> tuple[int, int, int, bytes]:
    size = struct.unpack("!i", recv_exactly(conn, 4))[0]
    data = recv_exactly(conn, size)
    api, version, correlation, client = struct.unpack_from("!hhih", data)
    return api, version, correlation, data[10 + client :]


def recv_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError
        data += chunk
    return data


def versions_body(sasl: bool = True) -> bytes:
    apis = [(18, 0, 3), (3, 0, 4)] + ([(17, 0, 1), (36, 0, 1)] if sasl else [])
    return struct.pack("!hi", 0, len(apis)) + b"".join(struct.pack("!hhh", *a) for a in apis)


def metadata_v4(brokers: int = 1) -> bytes:
    out = struct.pack("!ii", 0, brokers)
    for node in range(brokers):
        out += struct.pack("!ih", node, 9) + b"127.0.0.1" + struct.pack("!ih", 9092, -1)
    return out + struct.pack("!hii", -1, 0, 0)  # cluster null, controller 0, no topics


def string(data: bytes) -> bytes:
    return struct.pack("!h", len(data)) + data


def sasl_answer(error: int, data: bytes) -> bytes:
    """SaslAuthenticate v1: error, message, bytes, session lifetime."""
    message = string(b"bad login") if error else struct.pack("!h", -1)
    return struct.pack("!h", error) + message + struct.pack("!i", len(data)) + data + bytes(8)


class ScramServer:
    """The server side of RFC 5802, to check the client's proof (users: app / s3cret)."""

    def __init__(self, digest: str, password: str = "s3cret") -> None:  # noqa: S107
        self.digest = digest
        self.salt, self.rounds = b"pepper-salt", 4096
        self.salted = hashlib.pbkdf2_hmac(digest, password.encode(), self.salt, self.rounds)

    def first(self, message: bytes) -> bytes:
        self.client_bare = message.decode()[3:]
        nonce = dict(i.split("=", 1) for i in self.client_bare.split(","))["r"] + "srv"
        self.server_first = f"r={nonce},s={base64.b64encode(self.salt).decode()},i={self.rounds}"
        return self.server_first.encode()

    def final(self, message: bytes) -> bytes | None:
        text = message.decode()
        without, _, proof = text.rpartition(",p=")
        auth = f"{self.client_bare},{self.server_first},{without}".encode()
        client_key = hmac.digest(self.salted, b"Client Key", self.digest)
        stored = hashlib.new(self.digest, client_key).digest()
        signature = hmac.digest(stored, auth, self.digest)
        expected = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if base64.b64decode(proof) != expected:
            return None
        server_key = hmac.digest(self.salted, b"Server Key", self.digest)
        return b"v=" + base64.b64encode(hmac.digest(server_key, auth, self.digest))


def sasl_broker(mechanisms: tuple[str, ...]) -> Callable[[socket.socket], None]:
    def serve(conn: socket.socket) -> None:
        scram: ScramServer | None = None
        logged_in = False
        while True:
            api, _, correlation, body = read_request(conn)
            if api == 18:
                conn.sendall(frame(correlation, versions_body()))
            elif api == 17:
                mechanism = body[2:].decode()
                offered = struct.pack("!i", len(mechanisms)) + b"".join(
                    string(m.encode()) for m in mechanisms
                )
                error = 0 if mechanism in mechanisms else 33
                conn.sendall(frame(correlation, struct.pack("!h", error) + offered))
                if mechanism.startswith("SCRAM"):
                    scram = ScramServer("sha" + mechanism[-3:])
            elif api == 36:
                message = body[4:]
                if scram is None:  # PLAIN
                    logged_in = message == b"\0app\0s3cret"
                    conn.sendall(frame(correlation, sasl_answer(0 if logged_in else 58, b"")))
                elif message.startswith(b"n,,"):
                    conn.sendall(frame(correlation, sasl_answer(0, scram.first(message))))
                else:
                    final = scram.final(message)
                    logged_in = final is not None
                    conn.sendall(frame(correlation, sasl_answer(0 if final else 58, final or b"")))
            elif api == 3 and logged_in:
                conn.sendall(frame(correlation, metadata_v4()))
            else:
                return  # a SASL listener hangs up on anything before a login

    return serve


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_logins(mechanism: str) -> None:
    with scripted_peer(sasl_broker((mechanism,))) as port:
        option = f"#sasl={mechanism.lower()}"
        assert probe(f"kafka://app:s3cret@127.0.0.1:{port}{option}").reason == "1 broker"
        refused = probe(f"kafka://app:wrong@127.0.0.1:{port}{option}")
        assert refused.reason == "authentication failed (bad login)"
        assert not refused.permanent  # users are often created after the broker starts
        anonymous = probe(f"kafka://127.0.0.1:{port}")
        assert "a SASL listener? give credentials in the URL" in anonymous.reason


def test_a_mechanism_the_broker_does_not_offer_is_a_configuration_error() -> None:
    with scripted_peer(sasl_broker(("SCRAM-SHA-512",))) as port:
        outcome = probe(f"kafka://app:s3cret@127.0.0.1:{port}")
    assert outcome.permanent
    assert outcome.reason == "the broker does not offer SASL PLAIN (offers: SCRAM-SHA-512)"


def test_scram_client_against_rfc_7677_vector() -> None:
    """RFC 7677's SCRAM-SHA-256 example: user, pencil, the client nonce rOprNGfwEbeRWgbNEkqO."""
    client = scram.Scram("sha256", "user", "pencil")
    client.nonce = "rOprNGfwEbeRWgbNEkqO"
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.final(
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def replying(*answers: bytes) -> Callable[[socket.socket], None]:
    """A peer that reads each request and sends the next answer (b"": hangs up)."""

    def serve(conn: socket.socket) -> None:
        for answer in answers:
            _, _, correlation, _ = read_request(conn)
            if not answer:
                return
            conn.sendall(answer.replace(b"CORR", struct.pack("!i", correlation)))

    return serve


def whole(body: bytes) -> bytes:
    return struct.pack("!i", len(body) + 4) + b"CORR" + body


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        ((b"",), "the server closed the connection"),
        ((whole(versions_body())[:9],), "closed the connection in the middle of an answer"),
        ((b"HTTP/1.1 400 Bad Request\r\n\r\n",), "not a Kafka broker (a response of"),
        ((struct.pack("!i", 2**31 - 1),), "not a Kafka broker (a response of 2147483647 bytes)"),
        ((struct.pack("!i", -5),), "not a Kafka broker (a response of -5 bytes)"),
        ((whole(b"\0\0\x7f\xff\xff\xff"),), "malformed ApiVersions answer"),
        ((whole(versions_body()), whole(metadata_v4(0))), "the broker lists no brokers"),
        ((whole(versions_body()), whole(metadata_v4(3)[:20])), "malformed Metadata answer"),
        ((struct.pack("!ii", 10, 99) + b"\0" * 6,), "answer to request 99, not 1"),
    ],
)
def test_hostile_brokers(answers: tuple[bytes, ...], reason: str) -> None:
    with scripted_peer(replying(*answers)) as port:
        outcome = probe(f"kafka://127.0.0.1:{port}")
    assert not outcome.ready
    assert reason in outcome.reason


def metadata_listing(
    nodes: list[int], topics: list[tuple[str, int, list[tuple[int, int]]]]
) -> bytes:
    """Metadata v4: a broker entry per node id given (repeats kept), then each topic as
    (name, error, [(partition, leader)]) in order (repeats kept)."""
    out = struct.pack("!ii", 0, len(nodes))
    for node in nodes:
        out += struct.pack("!i", node) + string(b"127.0.0.1") + struct.pack("!ih", 9092, -1)
    out += struct.pack("!hii", -1, 0, len(topics))
    for name, error, partitions in topics:
        out += (
            struct.pack("!h", error)
            + string(name.encode())
            + b"\0"
            + struct.pack("!i", len(partitions))
        )
        for index, leader in partitions:
            out += struct.pack("!hiiiiii", 0, index, leader, 1, leader, 1, leader)
    return out


def metadata_probe(fragment: str, body: bytes) -> Outcome:
    with scripted_peer(replying(whole(versions_body(sasl=False)), whole(body))) as port:
        return probe(f"kafka://127.0.0.1:{port}{fragment}")


def test_brokers_are_counted_by_node_id() -> None:
    """One node listed three times is one broker: librdkafka and the Java client keep brokers
    by node id (confluent-kafka's ClusterMetadata.brokers is a dict of them)."""
    outcome = metadata_probe("#brokers=3", metadata_listing([1, 1, 1], []))
    assert not outcome.ready
    assert outcome.reason == "1 of 3 brokers"
    outcome = metadata_probe("#brokers=2", metadata_listing([1, 2, 1], []))
    assert outcome.ready
    assert outcome.reason.startswith("2 brokers")


def test_a_topic_listed_twice_is_judged_by_every_listing() -> None:
    """A topic twice in one answer: each listing must show it led (the first said "no leader",
    the second was believed), and its partitions are counted once each."""
    leaderless = ("t", 0, [(0, -1)])
    led = ("t", 0, [(0, 1), (1, 1)])
    for topics in ([leaderless, led], [led, leaderless]):
        outcome = metadata_probe("#topic=t", metadata_listing([1], topics))
        assert not outcome.ready
        assert outcome.reason == "topic 't' partition 0: no leader"
    missing: tuple[str, int, list[tuple[int, int]]] = ("t", 3, [])
    outcome = metadata_probe("#topic=t", metadata_listing([1], [led, missing]))
    assert outcome.reason == "topic 't' does not exist"
    twice = ("t", 0, [(0, 1), (1, 1), (0, 1)])
    outcome = metadata_probe("#topic=t", metadata_listing([1], [led, twice]))
    assert outcome.ready
    assert outcome.reason == "1 broker, 1 topic(s) with 2 partition(s) led"
