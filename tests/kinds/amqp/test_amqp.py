"""AMQP against the machine's RabbitMQ (users and vhosts of unique names: support/brokers.py)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme

from tests.support.attempts import assert_first_attempt_as_runner
from tests.support.brokers import RabbitNode, RabbitScratch, rabbit_node, tls_terminator
from tests.support.fast import FAST
from tests.support.targets import refusals
from tests.support.waiting import hostile_answers, reason_from_a_peer
from tests.support.waiting import reason as reason_of
from waitfor import Outcome, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kinds.amqp import wire as amqp
from waitfor.kinds.amqp.check import AmqpCheck
from waitfor.net.conversation import Conversation, Send, run_async


@pytest.fixture(scope="module")
def rabbit() -> Iterator[RabbitNode]:
    with rabbit_node() as node:
        yield node


@pytest.fixture
def address(rabbit: RabbitNode) -> str:
    return f"127.0.0.1:{rabbit.port}"


@pytest.fixture
def scratch(rabbit: RabbitNode) -> Iterator[RabbitScratch]:
    made = RabbitScratch(rabbit)
    yield made
    made.cleanup()


@pytest.mark.parametrize(
    ("url", "port", "user", "vhost", "shown"),
    [
        ("amqp://rabbit", 5672, "guest", "/", "amqp://rabbit:5672"),
        ("amqp://rabbit/", 5672, "guest", "/", "amqp://rabbit:5672/"),
        ("amqp://rabbit/%2F", 5672, "guest", "/", "amqp://rabbit:5672/%2F"),
        ("amqps://app:s3cret@rabbit:1234/orders", 1234, "app", "orders", None),
        ("amqp://app@rabbit/a%2Fb", 5672, "app", "a/b", "amqp://app@rabbit:5672/a%2Fb"),
        ("amqps://rabbit?heartbeat=30", 5671, "guest", "/", "amqps://rabbit:5671?heartbeat=30"),
    ],
)
def test_address(url: str, port: int, user: str, vhost: str, shown: str | None) -> None:
    target = parse_target(url)
    assert (target.kind, target.port, target.param("user"), target.param("vhost")) == (
        "amqp",
        port,
        user,
        vhost,
    )
    assert str(target) == (shown or "amqps://app:***@rabbit:1234/orders")


test_bad_addresses_are_refused = refusals(
    [
        ("amqp://rabbit/a/b", "percent-encoded"),
        ("amqp://rabbit/" + "v" * 256, "255 bytes"),
        ("amqp://rabbit#mode=query", "mode must be login or ping"),
        ("amqp://rabbit#vhost=x", "unknown option 'vhost'"),
        ("amqp://rabbit:0", "invalid port"),
    ]
)


def test_default_guest_login_opens_the_default_vhost(address: str) -> None:
    result = wait_for(f"amqp://{address}", timeout=10)[0]
    assert result.reason.startswith("vhost '/' open for 'guest' on RabbitMQ")


def test_ping_needs_no_credentials(address: str) -> None:
    result = wait_for(f"amqp://nobody:wrong@{address}/no-vhost#mode=ping", timeout=10)[0]
    assert result.reason.startswith("RabbitMQ")
    assert result.reason.endswith("answers AMQP")


def start_waiter(url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "waitfor", "-o", "text", "-t", "60", url],
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(waiter: subprocess.Popen[str], text: str) -> list[str]:
    """Lines from the waiter's stderr up to the one holding ``text``."""
    assert waiter.stderr is not None
    lines = []
    for line in waiter.stderr:
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"{text!r} never said; got {lines}")


def test_refused_login_is_retried_until_the_user_exists(
    scratch: RabbitScratch, address: str
) -> None:
    user = scratch.name("late-user")
    waiter = start_waiter(f"amqp://{user}:pw-{scratch.tag}@{address}/")
    try:
        lines = read_until(waiter, "not ready")
        assert "authentication failed (Login was refused" in lines[-1]
        scratch.add_user(user, f"pw-{scratch.tag}")
        scratch.permit(user, "/")
        assert waiter.wait(60) == 0
        assert waiter.stderr is not None
        assert f"vhost '/' open for '{user}'" in waiter.stderr.read()
    finally:
        waiter.kill()
        waiter.wait()


def test_missing_vhost_is_not_ready_until_created(scratch: RabbitScratch, address: str) -> None:
    user, vhost = scratch.name("user"), scratch.name("vhost")
    scratch.add_user(user, "pw")
    waiter = start_waiter(f"amqp://{user}:pw@{address}/{vhost}")
    try:
        lines = read_until(waiter, "not ready")
        assert lines[-1].rstrip().endswith(f"not ready: vhost '{vhost}' not found")
        scratch.add_vhost(vhost)  # without permissions yet: "access refused", still waiting
        scratch.permit(user, vhost)
        assert waiter.wait(60) == 0
    finally:
        waiter.kill()
        waiter.wait()


def test_logins_agree_with_rabbitmqctl_authenticate_user(
    scratch: RabbitScratch, address: str
) -> None:
    """Row by row on vhost '/': ready exactly when the broker's own tool accepts the login."""
    user = scratch.name("oracle")
    scratch.add_user(user, "right")
    scratch.permit(user, "/")
    rows = [
        ("guest", "guest"),
        ("guest", "wrong"),
        (user, "right"),
        (user, "Right"),
        ("nobody", "x"),
    ]
    for name, password in rows:
        try:
            scratch.ctl("authenticate_user", name, password)
            oracle = True
        except RuntimeError:
            oracle = False
        try:
            wait_for(f"amqp://{name}:{password}@{address}/", timeout=1, backoff=FAST)
            reason = ""
        except WaitTimeout as exc:
            reason = exc.results[0].reason
        assert (reason == "", reason.startswith("authentication failed")) == (oracle, not oracle)


def test_no_permission_on_the_vhost_is_not_ready(scratch: RabbitScratch, address: str) -> None:
    user, vhost = scratch.name("user"), scratch.name("vhost")
    scratch.add_user(user, "pw")
    scratch.add_vhost(vhost)
    said = reason_of(f"amqp://{user}:pw@{address}/{vhost}", timeout=1)
    assert said == f"access refused (access to vhost '{vhost}' refused for user '{user}')"


def test_no_half_open_connections_after_many_probes(scratch: RabbitScratch, address: str) -> None:
    """Every probe, accepted or refused, ends with Close/Close-Ok: the broker's list stays empty.

    The control: a connection held open after Open-Ok *is* in that list, so a leak would show.
    """
    user, vhost = scratch.name("probe"), scratch.name("vhost")
    scratch.add_user(user, "pw")
    scratch.add_vhost(vhost)
    scratch.permit(user, vhost)
    targets = [
        f"amqp://{user}:pw@{address}/{vhost}",  # ready
        f"amqp://{user}:pw@{address}/{vhost}-missing",  # vhost not found
        f"amqp://{user}:pw@{address}/{vhost}#mode=ping",
    ]
    for _ in range(20):
        for target in targets:
            missing = "missing" in target
            with pytest.raises(WaitTimeout) if missing else contextlib.nullcontext():
                wait_for(target, timeout=0.2 if missing else 10)
    assert _settled(lambda: scratch.connections(user)) == []

    held = asyncio.run(_hold_open(f"amqp://{user}:pw@{address}/{vhost}", scratch, user))
    assert held == [f"{user}\trunning"]


def _settled(read: Callable[[], list[str]]) -> list[str]:
    """The list once empty, or after 15 s (the broker tears connections down asynchronously)."""
    deadline = time.monotonic() + 15
    while (found := read()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


async def _hold_open(url: str, scratch: RabbitScratch, user: str) -> list[str]:
    """Log in and open the vhost, but do not close: what an impolite client leaves behind."""
    target = parse_target(url)
    reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
    try:
        opened = await run_async(_open_only(user, target.param("vhost") or "/"), reader, writer)
        assert opened.ready
        return await asyncio.to_thread(scratch.connections, user)
    finally:
        writer.close()


def _open_only(user: str, vhost: str) -> Conversation:
    yield Send(amqp.PROTOCOL_HEADER)
    yield from amqp.read_method()
    yield Send(amqp.method_frame(amqp.START_OK, amqp.start_ok(user, "pw")))
    _, args = yield from amqp.read_method()
    yield Send(amqp.method_frame(amqp.TUNE_OK, args[:6] + b"\0\0"))
    yield Send(amqp.method_frame(amqp.OPEN, amqp.shortstr(vhost) + b"\0\0"))
    method, _ = yield from amqp.read_method()
    return Outcome.up("open") if method == amqp.OPEN_OK else Outcome.down(str(method))


# --- TLS, through a TLS-terminating proxy in front of the shared broker ------------------------


def test_amqps_through_a_tls_terminator(ca: trustme.CA, tmp_path: Path, address: str) -> None:
    cert, key, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    issued = ca.issue_cert("127.0.0.1")
    issued.private_key_and_cert_chain_pem.write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    with tls_terminator(int(address.rpartition(":")[2]), (cert, cert)) as port:
        result = wait_for(f"amqps://127.0.0.1:{port}/#cacert={ca_file}", timeout=10)[0]
        assert result.reason.startswith("vhost '/' open for 'guest'")
        reason = reason_of(f"amqps://127.0.0.1:{port}/", timeout=1)
        assert reason.startswith("TLS certificate not trusted"), reason
        insecure = wait_for(f"amqps://127.0.0.1:{port}/#insecure", timeout=10)[0]
        assert insecure.ready


# --- what no real broker says on demand: scripted peers --------------------------------------


def _start_frame(mechanisms: bytes) -> bytes:
    properties = amqp.table({"product": "Fake", "version": "1"})
    args = b"\0\x09" + struct.pack("!I", len(properties)) + properties
    args += struct.pack("!I", len(mechanisms)) + mechanisms + struct.pack("!I", 5) + b"en_US"
    return amqp.method_frame(amqp.START, args)


def login_peer(mechanisms: bytes, after_login: bytes = b"") -> Callable[[socket.socket], None]:
    """A broker that offers ``mechanisms``, reads the login, then says ``after_login`` and reads
    on, or (where it is empty) hangs up."""

    def answer(conn: socket.socket) -> None:
        conn.recv(8)
        conn.sendall(_start_frame(mechanisms))
        conn.recv(1000)
        if after_login:
            conn.sendall(after_login)
            conn.recv(1000)

    return answer


def test_broker_without_plain_login_is_not_ready() -> None:
    said = reason_from_a_peer(login_peer(b"EXTERNAL"), "amqp://127.0.0.1:{port}")
    assert said == "the broker does not offer PLAIN login (offers: EXTERNAL)"


@pytest.mark.parametrize(
    ("after_login", "reason"),
    [
        (amqp.method_frame(amqp.TUNE, b"\0\1"), "malformed Connection.Tune"),
        (amqp.method_frame(amqp.CLOSE, b"\1"), "malformed Connection.Close"),
        (amqp.method_frame(amqp.SECURE, b""), "a login challenge PLAIN does not use"),
        (amqp.method_frame(amqp.OPEN_OK, b""), "expected Connection.Tune, got method (10, 41)"),
    ],
)
def test_hostile_answers_to_the_login_are_not_ready(after_login: bytes, reason: str) -> None:
    assert reason in reason_from_a_peer(
        login_peer(b"PLAIN", after_login), "amqp://127.0.0.1:{port}"
    )


def test_broker_hanging_up_after_the_login_is_an_authentication_failure() -> None:
    said = reason_from_a_peer(login_peer(b"PLAIN"), "amqp://127.0.0.1:{port}")
    assert said == "authentication failed (the broker hung up)"


test_hostile_peers_are_not_ready = hostile_answers(
    "amqp://127.0.0.1:{port}",
    [
        (b"AMQP\x01\x01\x00\x0a", "does not speak AMQP 0-9-1 (it offers 0101000a)"),
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "not an AMQP broker (it answered b'HTTP')"),
        (b"\x01\x00\x00\xff\xff\xff\xff", "not an AMQP broker"),
        (b"\x01\x00\x00\x00\x00\x00\x04\x00\x0a\x00\x0a\x00", "no frame-end octet"),
        (b"\x01\x00\x00\x00\x00\x00\x05\x00\x0a\x00\x0a\x00\xce", "malformed Connection.Start"),
        (b"\x01", "the server closed the connection"),
    ],
    read=8,
)


def test_first_attempt_without_the_event_loop_answers_as_the_runner(
    scratch: RabbitScratch, address: str
) -> None:
    """probe_now (the cold-start path) gives probe's outcome when ready, else leaves it (None)."""
    user, vhost = scratch.name("now"), scratch.name("vhost")
    scratch.add_user(user, "pw")
    scratch.add_vhost(vhost)
    scratch.permit(user, vhost)
    ready = [
        f"amqp://{address}",
        f"amqp://{user}:pw@{address}/{vhost}",
        f"amqp://{address}#mode=ping",
    ]
    not_ready = [f"amqp://{user}:pw@{address}/missing", f"amqp://{user}:bad@{address}/{vhost}"]
    assert_first_attempt_as_runner(ready, not_ready)
    assert AmqpCheck(parse_target(f"amqps://{address}")).probe_now(Deadline.after(2.0)) is None
