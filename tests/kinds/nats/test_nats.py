"""NATS against the machine's server (JetStream on) and nats-server instances of our own."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme

from tests.support.attempts import assert_first_attempt_as_runner
from tests.support.brokers import NATS_PORT, NatsServer, have, jetstream_greeting
from tests.support.fast import FAST
from tests.support.servers import listening, server_factory
from tests.support.targets import refusals
from tests.support.waiting import meanwhile, reason_from_a_peer
from waitfor import CheckFailed, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kinds.nats.check import NatsCheck

pytestmark = pytest.mark.skipif(not have("nats-server"), reason="nats-server not installed")
MakeServer = Callable[..., NatsServer]
shared = pytest.mark.skipif(not listening(NATS_PORT), reason="no NATS on 4222")


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[MakeServer]:
    """A factory of stopped nats-server instances; every one is stopped afterwards."""
    with server_factory(NatsServer, tmp_path) as make:
        yield make


def reason_of(url: str, timeout: float = 1) -> str:
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=timeout, backoff=FAST)
    return info.value.results[0].reason


@pytest.mark.parametrize(
    ("url", "port", "params", "shown"),
    [
        ("nats://bus", 4222, {}, "nats://bus:4222"),
        ("tls://bus:4443", 4443, {}, "tls://bus:4443"),
        ("nats://app:s3cret@bus", 4222, {"user": "app", "password": "s3cret"}, None),
        ("nats://t0k3n@bus:4222", 4222, {"token": "t0k3n"}, "nats://***@bus:4222"),
    ],
)
def test_address(url: str, port: int, params: dict[str, str], shown: str | None) -> None:
    target = parse_target(url)
    assert (target.kind, target.port, dict(target.params)) == ("nats", port, params)
    assert str(target) == (shown or "nats://app:***@bus:4222")


test_bad_addresses_are_refused = refusals(
    [
        ("nats://bus/subject", "nats targets are nats://"),
        ("nats://a:1,b:2", "one server per target"),
        ("nats://bus#jetstream&mode=ping", "jetstream needs mode=login"),
        ("nats://bus#jetstream=maybe", "takes true or false"),
    ]
)


@shared
def test_the_machines_server_with_jetstream() -> None:
    assert wait_for(f"nats://127.0.0.1:{NATS_PORT}", timeout=10)[0].reason.startswith(
        "PONG from nats-server"
    )
    result = wait_for(f"nats://127.0.0.1:{NATS_PORT}#jetstream", timeout=10)[0]
    assert result.reason.startswith("JetStream answers on nats-server"), result.reason


def test_credentials(nats: MakeServer) -> None:
    server = nats(user="app", password="right", monitor=True)
    server.start()
    address = f"127.0.0.1:{server.port}"
    assert wait_for(f"nats://app:right@{address}", timeout=10)[0].reason.startswith("PONG")
    assert reason_of(f"nats://app:wrong@{address}") == "authorization violation"
    with pytest.raises(CheckFailed, match="requires credentials and none were given"):
        wait_for(f"nats://{address}", timeout=10)
    assert wait_for(f"nats://{address}#mode=ping", timeout=10)[0].reason.endswith("answers")
    # JetStream is off on this server: no responders, at once (not a timeout)
    started = time.monotonic()
    reason = reason_of(f"nats://app:right@{address}#jetstream", timeout=2)
    assert reason == "JetStream is not enabled (no responders for $JS.API.INFO)"
    assert time.monotonic() - started < 10
    # every probe above closed its connection: the server holds none
    deadline = time.monotonic() + 10
    while server.client_count() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert server.client_count() == 0


def test_token(nats: MakeServer) -> None:
    server = nats(token="s3cr3t-token")
    server.start()
    assert wait_for(f"nats://s3cr3t-token@127.0.0.1:{server.port}", timeout=10)[0].ready
    assert reason_of(f"nats://other-token@127.0.0.1:{server.port}") == "authorization violation"


def test_jetstream_starting_later(nats: MakeServer) -> None:
    """Waiting from before the server exists until JetStream answers."""
    server = nats(jetstream=True)
    with meanwhile(1.0, server.start):
        result = wait_for(f"nats://127.0.0.1:{server.port}#jetstream", timeout=30)[0]
    assert result.attempts > 1
    assert result.reason.startswith("JetStream answers on nats-server"), result.reason


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """(certificate+key for localhost, the CA's certificate)."""
    ca = trustme.CA()
    cert, ca_file = tmp_path / "cert.pem", tmp_path / "ca.pem"
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(cert))
    ca.cert_pem.write_to_path(str(ca_file))
    return cert, ca_file


def test_tls(nats: MakeServer, certificate: tuple[Path, Path]) -> None:
    cert, ca_file = certificate
    server = nats(tls=(cert, cert), user="app", password="right")
    server.start()
    for scheme in ("tls", "nats"):  # nats:// upgrades when the server requires TLS, as clients do
        url = f"{scheme}://app:right@localhost:{server.port}"
        assert wait_for(f"{url}#cacert={ca_file}", timeout=10)[0].reason.startswith("PONG")
        assert reason_of(url).startswith("TLS certificate not trusted")
    plain = nats()
    plain.start()
    assert reason_of(f"tls://localhost:{plain.port}") == "the server does not offer TLS"


# --- what no real server says on demand: scripted peers ---------------------------------------


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "not a NATS server (it answered 'HTTP/1.1 400"),
        (b"INFO {not json\r\n", "malformed INFO from the server"),
        (b"INFO []\r\n", "malformed INFO from the server"),
        (b"INFO " + b"[" * 60000 + b"\r\n", "malformed INFO from the server (JSON nested too"),
        (b"INFO " + b'{"a":' * 6000 + b"\r\n", "malformed INFO from the server (JSON nested too"),
        (b"-ERR 'maximum connections exceeded'\r\n", "the server refused: maximum connections"),
        (b"INFO {}" + b" " * 70000, "not a NATS server (an endless line)"),
        (b"INFO {}\r\nWHAT\r\n", "unexpected answer to PING: 'WHAT'"),
        (b"INFO {}\r\n", "the server closed the connection"),
        (b"", "the server closed the connection"),
    ],
)
def test_hostile_peers_are_not_ready(answer: bytes, reason: str) -> None:
    def say(conn: socket.socket) -> None:
        if answer:  # else hang up at once
            conn.sendall(answer)
            conn.recv(1000)

    assert reason in reason_from_a_peer(say, "nats://127.0.0.1:{port}")


def msg(payload: bytes) -> bytes:
    return b"MSG _INBOX.x 1 %d\r\n%s\r\n" % (len(payload), payload)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (msg(b'{"a"'), "JetStream answered with something that is not JSON"),
        (b"MSG _INBOX.x 1 99999999\r\n", "malformed MSG line"),
        (b"MSG _INBOX.x 1 x\r\n", "malformed MSG line"),
        (msg(b'{"error":{"code":503,"description":"off"}}'), "JetStream: off"),
        (msg(b'{"error":"off"}'), "JetStream: off"),
        (msg(b"[]"), "JetStream answered with something unexpected"),
        (msg(b"[" * 500000), "JetStream answered with JSON nested too deeply"),
        (msg(b'{"error":' * 50000), "JetStream answered with JSON nested too deeply"),
        (b"HMSG _INBOX.x 1 16 16\r\nNATS/1.0 408\r\n\r\n\r\n", "did not answer (NATS/1.0 408)"),
        (b"-ERR 'Permissions Violation for Publish'\r\n", "JetStream request refused"),
    ],
)
def test_hostile_jetstream_answers(reply: bytes, reason: str) -> None:
    def say(conn: socket.socket) -> None:
        jetstream_greeting(conn)
        conn.sendall(reply)
        conn.recv(1000)

    assert reason in reason_from_a_peer(say, "nats://127.0.0.1:{port}#jetstream")


def test_first_attempt_without_the_event_loop_answers_as_the_runner(nats: MakeServer) -> None:
    """probe_now (the cold-start path) gives probe's outcome when ready, else leaves it (None)."""
    server, plain = nats(user="app", password="right"), nats(jetstream=True)
    server.start()
    plain.start()
    address = f"127.0.0.1:{server.port}"
    ready = [
        f"nats://app:right@{address}",
        f"nats://{address}#mode=ping",
        f"nats://127.0.0.1:{plain.port}#jetstream",
    ]
    not_ready = [f"nats://app:wrong@{address}", f"nats://app:right@{address}#jetstream"]
    assert_first_attempt_as_runner(ready, not_ready)
    assert NatsCheck(parse_target(f"tls://{address}")).probe_now(Deadline.after(2.0)) is None
