"""MQTT against the machine's Mosquitto and against Mosquitto instances of our own.

``mosquitto_sub -E`` (connect, subscribe, exit) is the oracle for "does this login work".
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme

from tests.support.attempts import assert_first_attempt_as_runner
from tests.support.brokers import MOSQUITTO_PORT, Mosquitto, have
from tests.support.command import waitfor
from tests.support.fast import FAST
from tests.support.servers import listening, scripted_peer, server_factory
from tests.support.targets import refusals
from tests.support.waiting import hostile_answers, meanwhile
from waitfor import CheckFailed, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kinds.mqtt.check import MqttCheck

pytestmark = pytest.mark.skipif(
    not have("mosquitto", "mosquitto_passwd", "mosquitto_sub"), reason="mosquitto not installed"
)
MakeBroker = Callable[..., Mosquitto]


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[MakeBroker]:
    """A factory of stopped Mosquitto instances; every one is stopped afterwards."""
    with server_factory(Mosquitto, tmp_path) as make:
        yield make


@pytest.mark.parametrize(
    ("url", "port", "user", "password", "shown"),
    [
        ("mqtt://broker", 1883, None, None, "mqtt://broker:1883"),
        ("mqtts://broker", 8883, None, None, "mqtts://broker:8883"),
        ("mqtt://app:s3cret@broker:1884/", 1884, "app", "s3cret", "mqtt://app:***@broker:1884"),
        ("mqtt://app@[::1]", 1883, "app", None, "mqtt://app@[::1]:1883"),
        ("mqtt://a%40b:p%3Aw@broker", 1883, "a@b", "p:w", "mqtt://a%40b:***@broker:1883"),
    ],
)
def test_address(url: str, port: int, user: str | None, password: str | None, shown: str) -> None:
    target = parse_target(url)
    assert (target.kind, target.port, target.param("user"), target.param("password")) == (
        "mqtt",
        port,
        user,
        password,
    )
    assert str(target) == shown


test_bad_addresses_are_refused = refusals(
    [
        ("mqtt://broker/topic", "mqtt targets are mqtt://"),
        ("mqtt://broker?x=1", "mqtt targets are mqtt://"),
        ("mqtt://broker#mode=query", "mode must be login or ping"),
        ("mqtts://broker#cacert=/nonexistent", "does not exist"),
    ]
)


@pytest.mark.skipif(not listening(MOSQUITTO_PORT), reason="no Mosquitto on 1883")
def test_the_machines_anonymous_broker() -> None:
    assert (
        wait_for(f"mqtt://127.0.0.1:{MOSQUITTO_PORT}", timeout=10)[0].reason == "CONNACK: accepted"
    )


def waitfor_exit(url: str) -> tuple[int, str]:
    result = waitfor("-t", "1", url)
    return result.returncode, result.stderr


def mosquitto_sub_exit(port: int, user: str | None, password: str | None) -> int:
    credentials = (["-u", user] if user else []) + (["-P", password] if password else [])
    command = ["mosquitto_sub", "-E", "-h", "127.0.0.1", "-p", str(port), "-t", "x"]
    return subprocess.run([*command, *credentials], capture_output=True, timeout=30).returncode


def test_logins_agree_with_mosquitto_sub(mosquitto: MakeBroker) -> None:
    """Row by row: ready exactly when ``mosquitto_sub -E`` connects; and why not, when not."""
    anonymous, protected = mosquitto(), mosquitto(users={"app": "right"})
    anonymous.start()
    protected.start()
    rows = [
        (anonymous.port, None, None, 0, "CONNACK: accepted"),
        (anonymous.port, "app", "whatever", 0, "CONNACK: accepted"),
        (protected.port, "app", "right", 0, "CONNACK: accepted"),
        (protected.port, "app", "wrong", 124, "not ready: CONNACK: not authorized"),
        (protected.port, "nobody", "x", 124, "not ready: CONNACK: not authorized"),
        (protected.port, None, None, 2, "demands credentials (not authorized) and none were given"),
    ]
    for port, user, password, code, reason in rows:
        userinfo = f"{user}:{password}@" if user else ""
        ours, output = waitfor_exit(f"mqtt://{userinfo}127.0.0.1:{port}")
        oracle = mosquitto_sub_exit(port, user, password)
        assert (ours == 0, ours) == (oracle == 0, code), (user, password, output)
        assert reason in output
        if password:
            assert password not in output


def waitfor_clients(log: str) -> list[str]:
    return re.findall(r" as (waitfor-\S+) ", log)


def goodbye(client: str, log: str) -> str | None:
    """How ``client`` left, as mosquitto logs it: a DISCONNECT, a hang-up, or not (yet)."""
    if f"Client {client} disconnected." in log:
        return "DISCONNECT"
    return "hang-up" if f"Client {client} closed its connection." in log else None


def test_every_probe_says_disconnect(mosquitto: MakeBroker) -> None:
    """The broker logs "disconnected" for a DISCONNECT, "closed its connection" for a hang-up."""
    broker = mosquitto()
    broker.start()
    for _ in range(10):
        wait_for(f"mqtt://127.0.0.1:{broker.port}", timeout=10)
    # The broker logs the last client's goodbye after waitfor has moved on: wait for the
    # goodbyes of waitfor's own clients (counting any "Client ... closed its connection", the
    # start's readiness check's "<unknown>" one included, stopped the broker a line early).
    log_file, until = broker.root / "broker.log", time.monotonic() + 10
    while time.monotonic() < until:
        log = log_file.read_text()
        if all(goodbye(client, log) for client in waitfor_clients(log)):
            break
        time.sleep(0.05)
    broker.stop()
    log = log_file.read_text()
    clients = waitfor_clients(log)
    assert len(set(clients)) == len(clients)  # a fresh random client id every time
    left = [goodbye(client, log) for client in clients]
    # Each wait's ready probe says DISCONNECT. On a loaded machine a wait's quick first attempt
    # may run out of its budget before the CONNACK: it hangs up, and the runner asks again.
    assert left.count("DISCONNECT") == 10, log
    assert set(left) <= {"DISCONNECT", "hang-up"}, log  # none left open


def test_ping_needs_no_credentials(mosquitto: MakeBroker) -> None:
    broker = mosquitto(users={"app": "right"})
    broker.start()
    result = wait_for(f"mqtt://127.0.0.1:{broker.port}#mode=ping", timeout=10)[0]
    assert result.reason == "the broker answers, CONNACK: not authorized"


def test_waits_for_a_broker_that_starts_later(mosquitto: MakeBroker) -> None:
    broker = mosquitto(users={"app": "right"})
    with meanwhile(1.0, broker.start):
        result = wait_for(f"mqtt://app:right@127.0.0.1:{broker.port}", timeout=30)[0]
    assert result.attempts > 1
    assert result.reason == "CONNACK: accepted"


def test_mqtts_with_a_private_ca(mosquitto: MakeBroker, tmp_path: Path) -> None:
    ca = trustme.CA()
    cert, ca_file = tmp_path / "cert.pem", tmp_path / "ca.pem"
    ca.issue_cert("localhost").private_key_and_cert_chain_pem.write_to_path(str(cert))
    ca.cert_pem.write_to_path(str(ca_file))
    broker = mosquitto(tls=(cert, cert))
    broker.start()
    url = f"mqtts://localhost:{broker.port}"
    assert wait_for(f"{url}#cacert={ca_file}", timeout=10)[0].reason == "CONNACK: accepted"
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=1, backoff=FAST)
    assert "TLS certificate not trusted" in info.value.results[0].reason
    with pytest.raises(WaitTimeout) as info:  # plaintext MQTT to a TLS listener
        wait_for(f"mqtt://localhost:{broker.port}", timeout=1, backoff=FAST)
    # the TLS listener hangs up (or answers a TLS alert) on an MQTT CONNECT
    reason = info.value.results[0].reason
    assert reason.startswith(
        (
            "connection lost",
            "not an MQTT broker",
            "the server closed",
            "the server reset",
        )
    ), reason


# --- what no real broker says on demand: scripted peers --------------------------------------


def connack(code: int, v5: bool = False) -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        conn.recv(1000)
        conn.sendall(bytes([0x20, 3, 0, code, 0]) if v5 else bytes([0x20, 2, 0, code]))
        time.sleep(0.05)

    return answer


@pytest.mark.parametrize(
    ("code", "v5", "url_userinfo", "outcome"),
    [
        (3, False, "", "CONNACK: server unavailable"),
        (0x88, True, "", "CONNACK: server unavailable"),
        (0x89, True, "", "CONNACK: server busy"),
        (4, False, "app:s3cret@", "CONNACK: bad user name or password"),
        (0x86, True, "app:s3cret@", "CONNACK: bad user name or password"),
        (0x84, True, "", "CONNACK: unsupported protocol version"),
        (0x42, False, "", "CONNACK: refused with code 66"),
    ],
)
def test_refusals_are_not_ready(code: int, v5: bool, url_userinfo: str, outcome: str) -> None:
    with scripted_peer(connack(code, v5)) as port, pytest.raises(WaitTimeout) as info:
        wait_for(f"mqtt://{url_userinfo}127.0.0.1:{port}", timeout=0.5, backoff=FAST)
    assert info.value.results[0].reason == outcome


@pytest.mark.parametrize("code", [5, 0x87, 4, 0x86])
def test_credentials_demanded_but_not_given_is_permanent(code: int) -> None:
    with scripted_peer(connack(code, code > 5)) as port, pytest.raises(CheckFailed):
        wait_for(f"mqtt://127.0.0.1:{port}", timeout=5)


def test_ping_is_not_ready_while_the_server_is_unavailable() -> None:
    with scripted_peer(connack(3)) as port, pytest.raises(WaitTimeout):
        wait_for(f"mqtt://127.0.0.1:{port}#mode=ping", timeout=0.5, backoff=FAST)


test_hostile_peers_are_not_ready = hostile_answers(
    "mqtt://127.0.0.1:{port}",
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "not an MQTT broker (it answered b'H')"),
        (b"\x20\xff\xff\xff\xff\x01", "malformed MQTT packet length"),
        (b"\x20\x01\x00", "not an MQTT broker"),
        (b"\x20\x02\x00", "the server closed the connection"),
        (b"", "the server closed the connection"),
    ],
    read=1000,
)


def test_first_attempt_without_the_event_loop_answers_as_the_runner(mosquitto: MakeBroker) -> None:
    """probe_now (the cold-start path) gives probe's outcome when ready, else leaves it (None)."""
    broker = mosquitto(users={"app": "right"})
    broker.start()
    address = f"127.0.0.1:{broker.port}"
    ready = [f"mqtt://app:right@{address}", f"mqtt://{address}#mode=ping"]
    not_ready = [f"mqtt://app:wrong@{address}", f"mqtt://{address}", "mqtt://127.0.0.1:1"]
    assert_first_attempt_as_runner(ready, not_ready)
    assert MqttCheck(parse_target(f"mqtts://{address}")).probe_now(Deadline.after(2.0)) is None
