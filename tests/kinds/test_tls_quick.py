"""The quick first attempt over TLS (probe_now on a blocking TLS socket) against the runner's.

Every TLS target whose plain form has a quick attempt has one too: https, rediss, amqps, mqtts,
NATS tls:// (and nats:// to a server that requires TLS), mongodb with tls=true, kafka+ssl. The
quick answer may only be None or the full path's ready outcome, reason included. Real TLS servers
here (Python's ssl on a scripted peer, redis-server, Mosquitto and nats-server with TLS; a TLS
terminator in front of RabbitMQ, mockupdb and librdkafka's mock cluster) make every handshake
failure the quick path must step aside for: an untrusted CA, a certificate for another host, an
expired one, a client certificate asked for and not given, a plaintext server, a peer that stalls
in the middle of the handshake; and the ones it must agree with: SNI chosen certificates, client
certificates given, TLS 1.2 only, an ALPN h2-only server, a close without TLS's goodbye.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from tests.support.attempts import (
    assert_first_attempt_as_runner,
    assert_quick_agrees,
    quick_and_full,
)
from tests.support.brokers import (
    Mosquitto,
    NatsServer,
    RabbitNode,
    have,
    rabbit_node,
    tls_terminator,
)
from tests.support.redisd import RedisServer
from tests.support.servers import read_request, scripted_peer, server_factory
from waitfor.base.deadline import Deadline
from waitfor.core.registry import check_class
from waitfor.core.targets import parse_target
from waitfor.kind import Outcome
from waitfor.kinds.amqp.check import AmqpCheck
from waitfor.kinds.http.check import HttpCheck

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


def both(target: str, budget: float = 2.0) -> tuple[Outcome | None, Outcome]:
    """Both paths, the full one cancelled 1 s past its budget: a stalled handshake fails here."""
    return quick_and_full(target, budget, overrun=1.0)


def decided(target: str) -> Outcome:
    """Both paths ready with the same outcome: the quick path answered it itself."""
    quick, full = both(target)
    assert full.ready, full
    assert quick == full
    return full


class Pki:
    """A private CA, its file, and server certificates issued by it (or by another CA)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ca = trustme.CA()
        self.ca_file = root / "ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_file))

    def context(self, *names: str, ca: trustme.CA | None = None, **issued: Any) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        (ca or self.ca).issue_cert(*(names or ("127.0.0.1", "localhost")), **issued).configure_cert(
            context
        )
        return context

    def files(self, name: str, *identities: str) -> tuple[Path, Path]:
        """(certificate chain, key) files of a certificate for ``identities``."""
        cert = self.ca.issue_cert(*identities)
        chain, key = self.root / f"{name}.crt", self.root / f"{name}.key"
        chain.write_bytes(b"".join(pem.bytes() for pem in cert.cert_chain_pems))
        cert.private_key_pem.write_to_path(str(key))
        return chain, key


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


class Seen:
    """What a TLS peer saw of each client: the server name asked (SNI), the protocol agreed."""

    def __init__(self) -> None:
        self.names: list[str | None] = []
        self.alpn: list[str | None] = []
        self.versions: list[str | None] = []


@contextlib.contextmanager
def tls_peer(
    context: ssl.SSLContext, answer: bytes | Callable[[ssl.SSLSocket], None] = OK
) -> Iterator[tuple[int, Seen]]:
    """A TLS server on a free port: the handshake, then the request read whole and ``answer``
    sent, then a close without TLS's goodbye (close_notify); or ``answer`` run. Yields the port
    and what it saw."""
    seen = Seen()

    def named(sock: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> None:
        seen.names.append(name)

    if context.sni_callback is None:  # a test's own callback stays
        context.sni_callback = named

    def reply(conn: socket.socket) -> None:
        with context.wrap_socket(conn, server_side=True) as tls:
            seen.alpn.append(tls.selected_alpn_protocol())
            seen.versions.append(tls.version())
            read_request(tls)
            if callable(answer):
                answer(tls)
            else:
                tls.sendall(answer)

    with scripted_peer(reply) as port:
        yield port, seen


# --- https -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "options", "reason"),
    [
        (OK, "", "HTTP 200"),
        (OK, "&body=ok", "HTTP 200, body matches"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", "&status=204", "HTTP 204"),
        (b"HTTP/1.1 200 OK\r\n\r\nok", "&body=%5Eok$", "HTTP 200, body matches"),  # to the close
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            "&body=ok&method=POST&data=x",
            "HTTP 200, body matches",
        ),
    ],
)
def test_a_ready_https_answer_is_decided_quickly(
    pki: Pki, answer: bytes, options: str, reason: str
) -> None:
    with tls_peer(pki.context(), answer) as (port, seen):
        outcome = decided(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}{options}")
    assert outcome == Outcome.up(reason)
    # the same hello both ways: no SNI for an IP address, ALPN http/1.1 (httpcore's offer)
    assert seen.names == [None, None]
    assert seen.alpn == [None, None]


def test_both_paths_offer_what_httpcore_offers(pki: Pki) -> None:
    """A server that speaks http/1.1 by ALPN agrees on it with both (httpcore offers it)."""
    context = pki.context()
    context.set_alpn_protocols(["h2", "http/1.1"])
    with tls_peer(context) as (port, seen):
        decided(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}")
    assert seen.alpn == ["http/1.1", "http/1.1"]


def test_an_h2_only_server_is_answered_the_same(pki: Pki) -> None:
    """ALPN h2 only: no protocol is agreed (OpenSSL's server goes on without one). If it then
    answers HTTP/1.1 both paths take it; if it speaks HTTP/2, the quick path steps aside."""
    context = pki.context()
    context.set_alpn_protocols(["h2"])
    with tls_peer(context) as (port, seen):
        decided(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}")
    assert seen.alpn == [None, None]
    preface = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an HTTP/2 SETTINGS frame
    with tls_peer(context, preface) as (port, _):
        quick, full = both(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}", budget=0.5)
    assert not full.ready
    assert quick is None


def test_sni_picks_the_certificate_on_both_paths(pki: Pki) -> None:
    """The server name sent is httpcore's (the URL's host, in lower case): a server that picks
    its certificate by it serves both paths the right one."""
    fallback = pki.context("other.example")
    right = pki.context("localhost")

    def pick(sock: ssl.SSLObject, name: str | None, _: ssl.SSLContext) -> None:
        seen.append(name)
        if name == "localhost":
            sock.context = right

    seen: list[str | None] = []
    fallback.sni_callback = pick
    with tls_peer(fallback) as (port, _):
        decided(f"https://LOCALHOST:{port}/#cacert={pki.ca_file}")
        assert seen == ["localhost", "localhost"]
        quick, full = both(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}")
    assert "TLS certificate not trusted" in full.reason, full
    assert quick is None


@pytest.mark.parametrize(
    "problem",
    ["untrusted", "wrong host", "expired", "not yet valid", "plaintext", "client cert missing"],
)
def test_a_handshake_that_fails_is_left_to_the_runner(pki: Pki, problem: str) -> None:
    past = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=2)
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=2)
    contexts = {
        "untrusted": lambda: pki.context(ca=trustme.CA()),
        "wrong host": lambda: pki.context("other.example"),
        "expired": lambda: pki.context(not_before=past, not_after=past),
        "not yet valid": lambda: pki.context(not_before=future),
        "client cert missing": lambda: asking_for_a_client_cert(pki),
    }
    if problem == "plaintext":
        peer: Any = scripted_peer(plain_http)
        with peer as port:
            quick, full = both(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}", budget=0.5)
    else:
        with tls_peer(contexts[problem]()) as (port, _):
            quick, full = both(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}", budget=0.5)
    assert not full.ready
    assert quick is None


def plain_http(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def asking_for_a_client_cert(pki: Pki) -> ssl.SSLContext:
    context = pki.context()
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(str(pki.ca_file))
    return context


def test_a_client_certificate_given_is_presented_on_both_paths(pki: Pki) -> None:
    chain, key = pki.files("client", "client@example")
    with tls_peer(asking_for_a_client_cert(pki)) as (port, _):
        decided(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}&cert={chain}&key={key}")


def test_tls_1_2_only(pki: Pki) -> None:
    context = pki.context()
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with tls_peer(context) as (port, seen):
        decided(f"https://localhost:{port}/#cacert={pki.ca_file}")
    assert seen.versions == ["TLSv1.2", "TLSv1.2"]


def test_insecure_skips_verification_on_both_paths(pki: Pki) -> None:
    with tls_peer(pki.context("other.example", ca=trustme.CA())) as (port, _):
        decided(f"https://127.0.0.1:{port}/#insecure")


HOSTILE: list[bytes] = [
    b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",  # bare LF
    b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nok",  # closes early
    b"HTTP/1.1 302 Found\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 503 Busy\r\nContent-Length: 2\r\n\r\nno",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    b"SSH-2.0-OpenSSH_9.6\r\n",
    b"",
]


@pytest.mark.parametrize("answer", HOSTILE, ids=range(len(HOSTILE)))
@pytest.mark.parametrize("options", ["", "&body=ok"])
def test_the_quick_https_attempt_says_only_what_httpx_says(
    pki: Pki, answer: bytes, options: str
) -> None:
    with tls_peer(pki.context(), answer) as (port, _):
        quick, full = both(f"https://127.0.0.1:{port}/#cacert={pki.ca_file}{options}", budget=0.5)
    assert_quick_agrees(quick, full)


# --- a peer that stalls in the middle of the handshake ------------------------------------------


def stalls_after_the_hello(conn: socket.socket) -> None:
    conn.recv(65536)  # the ClientHello
    conn.sendall(b"\x16\x03\x03\x00\x7a\x02\x00")  # the start of a ServerHello, then nothing
    conn.recv(1)


def silent_after_the_hello(conn: socket.socket) -> None:
    conn.recv(65536)
    conn.recv(1)


@pytest.mark.parametrize("peer", [stalls_after_the_hello, silent_after_the_hello])
@pytest.mark.parametrize(
    "target",
    [
        "https://127.0.0.1:{port}/",
        "rediss://127.0.0.1:{port}",
        "amqps://127.0.0.1:{port}",
        "mqtts://127.0.0.1:{port}",
        "mongodb://127.0.0.1:{port}/?tls=true",
        "kafka+ssl://127.0.0.1:{port}",
    ],
)
def test_a_stalled_handshake_ends_at_the_deadline(
    peer: Callable[[socket.socket], None], target: str
) -> None:
    with scripted_peer(peer) as port:
        check = check_class(target.partition(":")[0])(parse_target(target.format(port=port)))
        started = time.monotonic()
        assert check.probe_now(Deadline.after(0.3)) is None
        assert time.monotonic() - started < 0.5


# --- the conversation kinds ---------------------------------------------------------------------


def needs(*binaries: str) -> None:
    if not have(*binaries):
        pytest.skip(f"{' and '.join(binaries)} not installed (the test command installs them)")


def test_rediss(pki: Pki, tmp_path: Path) -> None:
    needs("redis-server")
    chain, key = pki.files("redis", "127.0.0.1", "localhost")
    files = ["--tls-cert-file", str(chain), "--tls-key-file", str(key)]
    files += ["--tls-ca-cert-file", str(pki.ca_file), "--tls-auth-clients", "no"]
    with server_factory(RedisServer, tmp_path) as make:
        server = make("--requirepass", "pw", *files)
        server.tls = True
        server.start()
        tls_cli = ["redis-cli", "--tls", "--cacert", str(pki.ca_file), "-p", str(server.port)]
        set_key = [
            *tls_cli,
            "-h",
            "127.0.0.1",
            "-a",
            "pw",
            "--no-auth-warning",
            "SET",
            "k",
            "ready",
        ]
        assert subprocess.run(set_key, capture_output=True, text=True, timeout=30).stdout == "OK\n"
        redis_both_ways(pki, server.port)


def redis_both_ways(pki: Pki, port: int) -> None:
    address = f"127.0.0.1:{port}"
    ready = [
        f"rediss://:pw@{address}#cacert={pki.ca_file}",
        f"rediss://:pw@{address}#cacert={pki.ca_file}&key=k&value=%5Eready$",  # the key's value
        f"rediss://{address}#cacert={pki.ca_file}",  # up, it asks for a password
        f"rediss://:pw@{address}/0#cacert={pki.ca_file}&mode=query",
        f"rediss://:pw@localhost:{port}#insecure",
    ]
    not_ready = [
        f"rediss://:pw@{address}",  # the system's CAs do not know ours
        f"rediss://:wrong@{address}#cacert={pki.ca_file}&mode=query",
        f"rediss://:pw@{address}#cacert={pki.ca_file}&key=k&value=%5Eno$",
        f"rediss://:pw@{address}#cacert={pki.ca_file}&key=absent&value=.",
        f"redis://:pw@{address}",  # plaintext to a TLS port
    ]
    assert_first_attempt_as_runner(ready, not_ready)
    for url in ready:
        assert check_class("rediss")(parse_target(url)).probe_now(Deadline.after(2)) is not None


def test_mqtts(pki: Pki, tmp_path: Path) -> None:
    needs("mosquitto")
    with server_factory(Mosquitto, tmp_path) as make:
        broker = make(users={"app": "right"}, tls=pki.files("mqtt", "localhost"))
        broker.start()
        mqtt_both_ways(pki, broker.port)


def mqtt_both_ways(pki: Pki, port: int) -> None:
    at = f"localhost:{port}"
    ready = [f"mqtts://app:right@{at}#cacert={pki.ca_file}", f"mqtts://{at}#mode=ping&insecure"]
    not_ready = [
        f"mqtts://app:wrong@{at}#cacert={pki.ca_file}",
        f"mqtts://app:right@127.0.0.1:{port}#cacert={pki.ca_file}",  # not its name
        f"mqtts://app:right@{at}",
    ]
    assert_first_attempt_as_runner(ready, not_ready)
    decided(ready[0])


def test_nats_tls(pki: Pki, tmp_path: Path) -> None:
    """NATS upgrades after INFO (a StartTls in the conversation): tls:// always, nats:// when
    the server requires it, as the clients do."""
    needs("nats-server")
    with server_factory(NatsServer, tmp_path) as make:
        server = make(tls=pki.files("nats", "localhost"), user="app", password="right")
        server.start()
        nats_both_ways(pki, server.port)


def nats_both_ways(pki: Pki, port: int) -> None:
    at = f"localhost:{port}"
    ready = [
        f"tls://app:right@{at}#cacert={pki.ca_file}",
        f"nats://app:right@{at}#cacert={pki.ca_file}",
        f"tls://{at}#mode=ping",  # INFO only: no handshake, no CA needed
    ]
    not_ready = [
        f"tls://app:right@{at}",
        f"tls://app:wrong@{at}#cacert={pki.ca_file}",
        f"tls://app:right@127.0.0.1:{port}#cacert={pki.ca_file}",
    ]
    assert_first_attempt_as_runner(ready, not_ready)
    decided(ready[0])


@pytest.fixture(scope="module")
def rabbit() -> Iterator[RabbitNode]:
    if not have("rabbitmq-server", "rabbitmqctl"):
        pytest.skip("RabbitMQ is not installed (the test command installs it)")
    with rabbit_node() as node:
        yield node


def test_amqps(pki: Pki, rabbit: RabbitNode) -> None:
    """RabbitMQ behind a TLS terminator (as a load balancer would put it)."""
    with tls_terminator(rabbit.port, pki.files("amqp", "127.0.0.1")) as port:
        at = f"127.0.0.1:{port}"
        ready = [f"amqps://{at}#cacert={pki.ca_file}", f"amqps://{at}#mode=ping&insecure"]
        not_ready = [f"amqps://{at}", f"amqps://guest:wrong@{at}#cacert={pki.ca_file}"]
        assert_first_attempt_as_runner(ready, not_ready)
        decided(ready[0])


def test_mongodb_tls(pki: Pki) -> None:
    from mockupdb import MockupDB  # type: ignore[import-untyped]

    mock = MockupDB()
    mock.autoresponds("hello", {"isWritablePrimary": True, "maxWireVersion": 17})
    mock.autoresponds("ismaster", {"ismaster": True, "maxWireVersion": 17})
    mock.autoresponds("ping", {"ok": 1})
    backend = mock.run()
    try:
        with tls_terminator(backend, pki.files("mongo", "localhost")) as port:
            at = f"localhost:{port}"
            ready = [
                f"mongodb://{at}/?tls=true&tlsCAFile={pki.ca_file}",
                f"mongodb://{at}/?tls=true#cacert={pki.ca_file}",
                f"mongodb://127.0.0.1:{port}/?tls=true&tlsInsecure=true",
            ]
            not_ready = [
                f"mongodb://{at}/?tls=true",
                f"mongodb://127.0.0.1:{port}/?tls=true&tlsCAFile={pki.ca_file}",
                f"mongodb://{at}/",  # plaintext to a TLS port
            ]
            assert_first_attempt_as_runner(ready, not_ready)
            decided(ready[0])
    finally:
        mock.stop()


def test_kafka_ssl(pki: Pki) -> None:
    from tests.support.kafkamock import mock_cluster

    with mock_cluster(1) as cluster:
        backend = cluster.addresses[0].rpartition(":")[2]
        with tls_terminator(int(backend), pki.files("kafka", "127.0.0.1")) as port:
            at = f"127.0.0.1:{port}"
            ready = [f"kafka+ssl://{at}#cacert={pki.ca_file}"]
            not_ready = [f"kafka+ssl://{at}", f"kafka://{at}"]
            assert_first_attempt_as_runner(ready, not_ready)
            decided(ready[0])


# --- what a TLS start-up imports ----------------------------------------------------------------


def test_a_ready_https_run_imports_no_event_loop_and_no_codec(pki: Pki) -> None:
    """The quick https attempt: ssl, but neither asyncio, httpx nor the IDNA codec (ssl encodes
    a str server name with it; the attempt hands it ASCII bytes)."""
    script = (
        "import os, sys\n"
        "from waitfor.cli import command as cli\n"
        "def listed(code):\n"  # the command ends with os._exit: no atexit
        "    names = ('asyncio', 'httpx', 'h11', 'encodings.idna', 'ssl', 'typing',\n"
        "             'waitfor.core.runner')\n"
        "    os.write(1, repr(sorted(n for n in names if n in sys.modules)).encode())\n"
        "    real(code)\n"
        "real, os._exit = os._exit, listed\n"
        "cli.run()\n"
    )
    with tls_peer(pki.context("localhost")) as (port, _):
        url = f"https://localhost:{port}/#cacert={pki.ca_file}"
        done = subprocess.run(
            [sys.executable, "-c", script, "-q", url], capture_output=True, text=True, timeout=30
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['ssl']"


def test_the_server_name_is_what_the_idna_codec_gives() -> None:
    from waitfor.net.tls import server_name

    for host in ["localhost", "Example.COM", "a.b.", "127.0.0.1", "::1", "x" * 63, "é.example"]:
        name = server_name(host)
        assert (name if isinstance(name, bytes) else name.encode("idna")) == host.encode("idna")
    for host in ["a..b", ".a", "x" * 64, "x" * 64 + ".a"]:
        assert isinstance(server_name(host), str)  # left to ssl, which refuses it
        with pytest.raises(UnicodeError):
            host.encode("idna")


def test_https_and_other_kinds_do_not_share_a_context_httpcore_changes(pki: Pki) -> None:
    """httpcore sets ALPN on the context it is given: https's own context already has it, and
    the context another kind gets for the same options stays as it was made."""
    https = HttpCheck(parse_target(f"https://127.0.0.1:1/#cacert={pki.ca_file}"))
    amqps = AmqpCheck(parse_target(f"amqps://127.0.0.1:1#cacert={pki.ca_file}"))
    assert https.https_context() is not amqps.tls_context
    assert https.https_context() is https.https_context()  # one, shared by every https target


def test_targets_that_will_not_fit_are_left_to_the_runner_at_once(pki: Pki) -> None:
    """The first attempts show the pace: 100 TLS targets at 20 ms each would not fit in the
    quick budget, so the quick path stops after the first, not at the end of its budget."""
    from waitfor.core import first_attempt as quickstart

    def slow(tls: ssl.SSLSocket) -> None:
        time.sleep(0.02)
        tls.sendall(OK)

    with tls_peer(pki.context(), slow) as (port, _):
        targets = [
            parse_target(f"https://127.0.0.1:{port}/{i}#cacert={pki.ca_file}") for i in range(100)
        ]
        started = time.monotonic()
        events: list[Any] = []
        assert (
            quickstart.all_ready_now(targets, started=started, budget=5, emit=events.append) is None
        )
        assert time.monotonic() - started < quickstart.QUICK_BUDGET / 2
        assert events == []
        few = targets[:3]
        results = quickstart.all_ready_now(
            few, started=time.monotonic(), budget=5, emit=events.append
        )
        assert results is not None
        assert all(r.ready for r in results)
