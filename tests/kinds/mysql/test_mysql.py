"""MySQL/MariaDB checks against real servers, with ``mysqladmin ping`` as the oracle for ping mode.

Each test starts its own MariaDB (tests/support/mysqld.py) except the steady-state row against the
machine's shared server, which is only pinged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import trustme

from tests.support.attempts import assert_first_attempt_as_runner, probe
from tests.support.mysqld import MariaDB
from tests.support.ports import free_port
from tests.support.servers import Script, banner_server, http_server, scripted_peer, started
from tests.support.waiting import assert_hidden_after_a_timeout
from waitfor import CheckFailed, TargetError, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kind import Outcome
from waitfor.kinds.mysql.check import MysqlCheck
from waitfor.kinds.mysql.ping import Greeting, handshake_response, scramble

MakeServer = Callable[..., MariaDB]


def mysqladmin_ping(host: str, port: int, user: str = "", password: str = "") -> int:
    command = ["mysqladmin", "--no-defaults", "--connect-timeout=3", "-h", host, "-P", str(port)]
    command += [f"-u{user}"] if user else []
    command += [f"-p{password}"] if password else []
    return subprocess.run([*command, "ping"], capture_output=True, timeout=30).returncode


def assert_parity(host: str, port: int, user: str = "", password: str = "") -> Outcome:
    """waitfor's ping and mysqladmin's exit status agree; returns waitfor's outcome."""
    userinfo = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    outcome = probe(f"mysql://{userinfo}{host}:{port}")
    oracle = mysqladmin_ping(host, port, user, password)
    assert (oracle == 0, outcome.ready) == (outcome.ready, outcome.ready), outcome.reason
    return outcome


@pytest.fixture
def running(mariadb: MakeServer) -> MariaDB:
    return started(mariadb())


# --- the parity matrix with mysqladmin ping ---------------------------------------------------


def test_server_down() -> None:
    outcome = assert_parity("127.0.0.1", free_port())
    assert (outcome.ready, "connection refused" in outcome.reason) == (False, True)


def test_alive_and_logged_in(running: MariaDB) -> None:
    outcome = assert_parity("127.0.0.1", running.port, "root")
    assert outcome.ready
    assert outcome.reason.startswith("accepting connections (MySQL protocol 10, server 10.11")


def test_alive_although_the_login_is_refused(running: MariaDB) -> None:
    running.sql("CREATE USER 'app'@'%' IDENTIFIED BY 'right'")
    for user, password in (("nobody", ""), ("app", ""), ("app", "wrong")):
        outcome = assert_parity("127.0.0.1", running.port, user, password)
        assert outcome.ready
        assert "server said: Access denied for user" in outcome.reason
    assert "server said" not in assert_parity("127.0.0.1", running.port, "app", "right").reason


def test_the_machines_shared_server() -> None:
    if mysqladmin_ping("127.0.0.1", 3306) != 0:
        pytest.skip("no MariaDB on 127.0.0.1:3306")
    assert assert_parity("127.0.0.1", 3306).ready


def test_non_mysql_listeners() -> None:
    with http_server(Script()) as (url, _):  # silent until it gets a request line
        port = int(url.rsplit(":", 1)[1])
        assert "timed out" in probe(f"mysql://127.0.0.1:{port}", 1.0).reason
        assert mysqladmin_ping("127.0.0.1", port) != 0
    with banner_server(b"220 mail.example ESMTP\r\n") as port:
        outcome = assert_parity("127.0.0.1", port)
        assert outcome.reason == "not a MySQL server (oversized packet)"
    with banner_server(b"\x05\0\0\0\x09hello") as port:  # a pre-4.1 protocol 9 greeting
        outcome = assert_parity("127.0.0.1", port)
        assert outcome.reason == "not a MySQL server (its greeting is protocol 9, not protocol 10)"


def test_first_attempt_without_the_event_loop_answers_as_the_runner(running: MariaDB) -> None:
    """probe_now (the cold-start path) gives probe's outcome when ready, else leaves it (None)."""
    running.sql("CREATE USER 'app'@'%' IDENTIFIED BY 'right'")
    port = running.port
    ready = [
        f"mysql://root@127.0.0.1:{port}",
        f"mysql://app:right@127.0.0.1:{port}",
        f"mysql://app:wrong@127.0.0.1:{port}",  # alive: the server said "Access denied"
        f"mysql://app:right@127.0.0.1:{port}?ssl-mode=REQUIRED",  # no scramble sent: refused
    ]
    not_ready = [f"mysql://127.0.0.1:{free_port()}"]
    assert_first_attempt_as_runner(ready, not_ready)
    query = MysqlCheck(parse_target(f"mysql://root@127.0.0.1:{port}#mode=query"))
    assert asyncio.run(query.probe(Deadline.after(2.0))).ready
    assert query.probe_now(Deadline.after(2.0)) is None  # PyMySQL's, on the event loop
    greeting = (  # a greeting, then the server hangs up on the login: alive either way
        b"\x0a10.11.0-fake\0" + bytes(4) + b"abcdefgh\0" + struct.pack("<HBHH", 0x8200, 33, 2, 8)
    )
    greeting += bytes([21]) + bytes(10) + b"ijklmnopqrst\0mysql_native_password\0"
    packet = len(greeting).to_bytes(3, "little") + b"\0" + greeting
    with banner_server(packet) as port:
        check = MysqlCheck(parse_target(f"mysql://127.0.0.1:{port}"))
        later = asyncio.run(check.probe(Deadline.after(2.0)))
        assert later.reason == "accepting connections (MySQL protocol 10, server 10.11.0-fake)"
        assert check.probe_now(Deadline.after(2.0)) == later

    def reset_after_greeting(conn: socket.socket) -> None:
        conn.sendall(packet)
        conn.recv(1000)  # the login
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST

    with scripted_peer(reset_after_greeting) as port:  # a reset, not a hang-up: alive too
        check = MysqlCheck(parse_target(f"mysql://127.0.0.1:{port}"))
        assert (
            check.probe_now(Deadline.after(2.0))
            == asyncio.run(check.probe(Deadline.after(2.0)))
            == later
        )
    for banner in (b"220 mail.example ESMTP\r\n", b"\x05\0\0\0\x09hello", b"\x0a"):
        with banner_server(banner) as port:
            assert (
                MysqlCheck(parse_target(f"mysql://127.0.0.1:{port}")).probe_now(Deadline.after(2.0))
                is None
            )


# An error packet instead of the greeting: the app cannot connect either. mysqladmin agrees: its
# client library takes a server error before the handshake for a failed connection (2002).


def hold_a_connection(server: MariaDB, user: str) -> pymysql.connections.Connection[Any]:
    """A connection kept open; retried while the start-up check's own one is still counted."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return pymysql.connect(unix_socket=str(server.socket), user=user)
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != 1040 or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def test_too_many_connections_is_not_ready(mariadb: MakeServer) -> None:
    server = mariadb()
    server.settings.append("--max-connections=10")  # MariaDB's minimum
    server.start()
    server.sql("CREATE USER holder@localhost; CREATE USER app@'%'")
    holders = []
    try:
        for _ in range(10):
            holders.append(hold_a_connection(server, "holder"))
        # Full for users, one slot left for an administrator: root logs in, app is refused
        # after the greeting. mysqladmin -u app says "alive" (a server error); we differ on
        # purpose (docs/kinds/mysql.md): the app cannot connect.
        assert assert_parity("127.0.0.1", server.port, "root").ready
        outcome = probe(f"mysql://app@127.0.0.1:{server.port}")
        assert (outcome.ready, mysqladmin_ping("127.0.0.1", server.port, "app")) == (False, 0)
        assert outcome.reason == "server refused the login: Too many connections (1040)"
        holders.append(hold_a_connection(server, "root"))
        # Full for everyone: the error comes instead of the greeting, and both say so.
        outcome = assert_parity("127.0.0.1", server.port, "root")
        assert not outcome.ready
        assert outcome.reason == "server refused the connection: Too many connections (1040)"
    finally:
        for holder in holders:
            holder.close()
    # The server counts a connection out when its thread ends, a moment after the close.
    assert wait_for(f"mysql://app@127.0.0.1:{server.port}", timeout=20)[0].ready


def test_host_not_allowed_is_not_ready(running: MariaDB) -> None:
    running.sql("DELETE FROM mysql.global_priv WHERE Host <> 'localhost'; FLUSH PRIVILEGES")
    outcome = assert_parity("127.0.0.1", running.port)
    assert not outcome.ready
    assert "Host '127.0.0.1' is not allowed to connect to this MariaDB server (1130)" in (
        outcome.reason
    )
    threading.Timer(0.5, lambda: running.sql("CREATE USER 'app'@'127.0.0.1'")).start()
    assert wait_for(f"mysql://127.0.0.1:{running.port}", timeout=20)[0].ready


# --- waiting --------------------------------------------------------------------------------


def test_waits_for_a_server_started_later(mariadb: MakeServer) -> None:
    server = mariadb()
    threading.Timer(1.0, server.start, kwargs={"wait": False}).start()
    [result] = wait_for(f"mysql://127.0.0.1:{server.port}", timeout=60)
    assert result.ready
    assert result.attempts > 1


def test_cli_exit_codes_and_one_line_errors(running: MariaDB) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "waitfor", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30)

    up = run("-o", "text", f"mariadb://127.0.0.1:{running.port}")
    assert up.returncode == 0
    # the report adds no parentheses around the detail's own
    assert " is ready: accepting connections (MySQL protocol 10, server " in up.stderr
    down = run("-t", "0.5", f"mysql://127.0.0.1:{free_port()}")
    assert (down.returncode, "connection refused" in down.stderr) == (124, True)
    for bad, message in (
        ("mysql://db/x?ssl-mode=sometimes", "ssl-mode must be one of"),
        ("mysql://db/x?timeout=3", "unknown query parameter 'timeout'"),
        ("mysql://db/a/b", "the path is the database name"),
        ("mysql://db/x#mode=ping&table=t", "table needs mode=query"),
        ("mysql://db/x#mode=write", "mode must be ping or query"),
    ):
        result = run(bad)
        assert (result.returncode, result.stderr.count("\n")) == (2, 1), result.stderr
        assert message in result.stderr


# --- the probe is a polite client -------------------------------------------------------------

PINGS = 300
CLIENT = "10.254.16.1"  # not loopback: the server keeps no host cache for loopback clients
PING_LOOP = """
import asyncio, sys
from waitfor import parse_target
from waitfor.base.deadline import Deadline
from waitfor.core.registry import check_class

async def main(url, count):
    target = parse_target(url)
    check = check_class(target.scheme)(target)
    print(sum([(await check.probe(Deadline.after(5))).ready for _ in range(count)]))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


@pytest.fixture
def netns() -> Iterator[str]:
    """A private network namespace whose loopback device also carries CLIENT."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    name = f"wf16m{os.getpid() % 100000}"
    subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True)
    try:
        for command in (["link", "set", "lo", "up"], ["addr", "add", f"{CLIENT}/32", "dev", "lo"]):
            subprocess.run(["ip", "-n", name, *command], check=True, capture_output=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def test_hundreds_of_pings_leave_no_trace(mariadb: MakeServer, netns: str) -> None:
    server = mariadb(netns)
    server.settings += ["--performance-schema=ON", "--max-connect-errors=10"]
    server.start()
    server.sql("CREATE USER 'app'@'%' IDENTIFIED BY 'app-pass'")

    def trace() -> dict[str, int]:
        counters = server.status("Aborted_connects", "Aborted_connects_preauth", "Aborted_clients")
        row = server.sql(
            "SELECT SUM_CONNECT_ERRORS, COUNT_HANDSHAKE_ERRORS, COUNT_AUTHENTICATION_ERRORS,"
            " COUNT_HOST_BLOCKED_ERRORS FROM performance_schema.host_cache"
            " WHERE IP = '10.254.16.1'"  # CLIENT
        ).split()
        names = ("connect_errors", "handshake_errors", "authentication_errors", "host_blocked")
        return counters | dict(zip(names, map(int, row or ["0"] * 4), strict=True))

    def pings(url: str, count: int) -> int:
        command = ["ip", "netns", "exec", netns, sys.executable, "-c", PING_LOOP, url, str(count)]
        return int(subprocess.run(command, check=True, capture_output=True, timeout=120).stdout)

    def mysqladmin_pings(count: int, user: str) -> None:
        for _ in range(count):
            command = ["ip", "netns", "exec", netns, "mysqladmin", "--no-defaults"]
            command += ["-h", CLIENT, f"-u{user}", "ping"]
            assert subprocess.run(command, capture_output=True, timeout=30).returncode == 0

    def delta(before: dict[str, int]) -> dict[str, int]:
        """The change since ``before``, once the server's counters stop moving: it counts a
        refused login as its thread ends, a moment after the client saw the refusal."""
        now, previous, deadline = trace(), None, time.monotonic() + 10
        while now != previous and time.monotonic() < deadline:
            time.sleep(0.1)
            previous, now = now, trace()
        return {key: value - before[key] for key, value in now.items()}

    # With credentials that work: the login succeeds and COM_QUIT ends it. No trace at all.
    before = trace()
    assert pings(f"mysql://app:app-pass@{CLIENT}", PINGS) == PINGS
    assert set(delta(before).values()) == {0}
    # Without a password the login is refused, as mysqladmin's own is: the server counts a
    # refused login per ping (Aborted_connects, authentication errors), exactly as it does for
    # mysqladmin, but no handshake error, so the host never nears max_connect_errors.
    before = trace()
    assert pings(f"mysql://app@{CLIENT}", PINGS) == PINGS
    ours = delta(before)
    before = trace()
    mysqladmin_pings(10, "app")
    oracle = delta(before)
    assert {key: value / PINGS for key, value in ours.items()} == {
        key: value / 10 for key, value in oracle.items()
    }
    assert ours["handshake_errors"] == ours["connect_errors"] == ours["host_blocked"] == 0
    assert ours["Aborted_connects_preauth"] == ours["Aborted_clients"] == 0
    # The control: a client that hangs up after the greeting is what the server holds against
    # the host, so the counters above would have seen it.
    before = trace()
    hang_up = "import socket; s = socket.create_connection((%r, 3306)); s.recv(512); s.close()"
    command = ["ip", "netns", "exec", netns, sys.executable, "-c", hang_up % CLIENT]
    subprocess.run(command, check=True, timeout=30)
    deadline = time.monotonic() + 10
    while delta(before)["handshake_errors"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert delta(before)["handshake_errors"] == 1


# --- query mode -------------------------------------------------------------------------------


def test_query_mode(running: MariaDB) -> None:
    assert probe(running.url("mysql", extra="#mode=query")).reason == "SELECT 1 succeeded"


def test_query_mode_waits_for_the_database(running: MariaDB) -> None:
    threading.Timer(1.0, lambda: running.sql("CREATE DATABASE appdb")).start()
    reasons: list[str] = []
    [result] = wait_for(
        running.url("appdb", extra="#mode=query"),
        timeout=20,
        on_event=lambda e: reasons.append(e.reason),
    )
    assert result.ready
    assert "Unknown database 'appdb' (1049)" in reasons
    assert probe(running.url("appdb")).ready  # the ping said "up" all along


def test_query_mode_wrong_password_is_retried_never_shown(running: MariaDB) -> None:
    running.sql("CREATE USER 'app'@'%' IDENTIFIED BY 'right-one'")
    url = f"mysql://app:late-pass-7@127.0.0.1:{running.port}/#mode=query"
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=1.5)
    [result] = info.value.results
    assert result.attempts > 1
    assert result.reason.startswith("authentication failed: Access denied for user 'app'")
    assert "late-pass-7" not in f"{info.value} {info.value.results}"
    threading.Timer(
        0.5, lambda: running.sql("ALTER USER 'app'@'%' IDENTIFIED BY 'late-pass-7'")
    ).start()
    assert wait_for(url, timeout=20)[0].ready


def test_query_mode_user_created_later(running: MariaDB) -> None:
    url = f"mysql://late:pw-1@127.0.0.1:{running.port}/#mode=query"
    threading.Timer(1.0, lambda: running.sql("CREATE USER 'late'@'%' IDENTIFIED BY 'pw-1'")).start()
    assert wait_for(url, timeout=20)[0].attempts > 1


def test_query_mode_without_a_password_is_a_configuration_error(running: MariaDB) -> None:
    running.sql("CREATE USER 'app'@'%' IDENTIFIED BY 'secret'")
    with pytest.raises(CheckFailed, match="refused the login and no password was given"):
        wait_for(f"mysql://app@127.0.0.1:{running.port}/#mode=query", timeout=10)
    assert probe(f"mysql://app@127.0.0.1:{running.port}").ready  # ping: alive regardless


def test_table_appears_after_migrations(running: MariaDB) -> None:
    running.sql("CREATE DATABASE app; CREATE DATABASE other; CREATE TABLE other.users (id INT)")
    url = running.url("app", extra="#table=users")
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=1)  # schema-correct: other.users is not app.users
    assert info.value.results[0].reason == "table 'users' does not exist yet in database 'app'"
    threading.Timer(0.5, lambda: running.sql("CREATE TABLE app.users (id INT)")).start()
    [result] = wait_for(url, timeout=20)
    assert result.reason == "table 'users' exists"
    with pytest.raises(TargetError, match="table needs mode=query"):
        parse_target(running.url("app", extra="#mode=ping&table=users"))
    with pytest.raises(CheckFailed, match="needs the database in the URL"):
        wait_for(running.url("", extra="#table=users"), timeout=5)


def test_native_password_and_the_caching_sha2_client_side(running: MariaDB) -> None:
    running.sql(
        "CREATE USER 'native'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('n-pw')"
    )
    assert probe(f"mysql://native:n-pw@127.0.0.1:{running.port}/#mode=query").ready
    assert "server said" not in probe(f"mysql://native:n-pw@127.0.0.1:{running.port}").reason
    # MariaDB has no caching_sha2_password server side. What a MySQL 8 server checks on the fast
    # path is that scramble XOR SHA256(SHA256(SHA256(pw)) + nonce) gives back SHA256(pw), whose
    # double hash it stores: check our ping's answer that way. PyMySQL does the query mode's.
    nonce = os.urandom(20)
    proof = scramble("caching_sha2_password", "c-pw", nonce)
    stored = hashlib.sha256(hashlib.sha256(b"c-pw").digest()).digest()
    mask = hashlib.sha256(stored + nonce).digest()
    recovered = bytes(a ^ b for a, b in zip(proof, mask, strict=True))
    assert hashlib.sha256(recovered).digest() == stored
    response = handshake_response(Greeting("8.0", nonce, "caching_sha2_password"), "u", "c-pw")
    assert response.endswith(b"u\0" + bytes([32]) + proof + b"caching_sha2_password\0")


@pytest.fixture
def tls_server(mariadb: MakeServer, tmp_path: Path) -> tuple[MariaDB, trustme.CA]:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "server.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    server = mariadb()
    server.settings += [
        f"--ssl-cert={tmp_path / 'server.crt'}",
        f"--ssl-key={tmp_path / 'server.key'}",
        "--require-secure-transport=ON",
    ]
    server.start()
    server.sql("CREATE USER 'app'@'%' IDENTIFIED BY 'tls-pw'")
    return server, ca


def test_tls_modes(tls_server: tuple[MariaDB, trustme.CA], tmp_path: Path) -> None:
    server, _ = tls_server
    base = f"mysql://app:tls-pw@127.0.0.1:{server.port}/"
    ca = tmp_path / "ca.crt"
    for query in (
        "",  # PREFERRED: TLS because the server offers it
        "?ssl-mode=REQUIRED",
        f"?ssl-mode=VERIFY_CA&ssl-ca={ca}",
        f"?ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}",
    ):
        assert probe(f"{base}{query}#mode=query").ready, query
    refused = probe(f"{base}?ssl-mode=DISABLED#mode=query")
    assert not refused.ready
    assert refused.reason.startswith("authentication failed:")  # MariaDB's word for it
    other = tmp_path / "other.crt"
    trustme.CA().cert_pem.write_to_path(str(other))
    wrong_ca = probe(f"{base}?ssl-mode=VERIFY_CA&ssl-ca={other}#mode=query")
    assert not wrong_ca.ready
    assert "certificate verify failed" in wrong_ca.reason
    # The ping needs no TLS: the greeting comes before it.
    assert assert_parity("127.0.0.1", server.port, "app").ready


def test_missing_ca_file_is_refused_when_parsed(running: MariaDB, tmp_path: Path) -> None:
    """As for rediss/mqtts/grpcs: exit 2 before "waiting for", not after."""
    url = running.url(extra=f"?ssl-mode=VERIFY_CA&ssl-ca={tmp_path}/none.crt#mode=query")
    with pytest.raises(TargetError, match=r"ssl-ca .*none\.crt' does not exist"):
        parse_target(url)


def test_passwords_never_shown() -> None:
    texts = [
        f"mysql://app:my-s3cret@127.0.0.1:{free_port()}/db",
        f"mariadb://app:my-s3cret@127.0.0.1:{free_port()}/db#mode=query",
        f"mysql://app:my%2Ds3cret@127.0.0.1:{free_port()}/db?ssl-mode=REQUIRED#mode=query",
    ]
    assert_hidden_after_a_timeout(texts, ["my-s3cret", "my%2Ds3cret"], "app:***@127.0.0.1")


@pytest.mark.parametrize(
    ("text", "part"),
    [
        ("mysql://app:%FF@db/app", "password"),
        ("mariadb://%C3%28:p@db/app", "user"),
        ("mysql://app@db/%FF", "database name"),
    ],
)
def test_parts_that_are_not_utf8_once_decoded_are_refused(text: str, part: str) -> None:
    with pytest.raises(TargetError, match=f"the {part} is not valid UTF-8 once percent-decoded"):
        parse_target(text)


def test_address_forms() -> None:
    assert str(parse_target("mysql://db")) == "mysql://db:3306"
    assert str(parse_target("mariadb://u:p@[::1]:3307/app")) == "mariadb://u:***@[::1]:3307/app"
    assert dict(parse_target("mysql://db/x?sslMode=verify_ca").params)["ssl_mode"] == "VERIFY_CA"


# --- query mode against scripted peers ---------------------------------------------------------

CLIENT_SSL = 0x800


def peer_greeting(
    capabilities: int = 0x81FF_F7FF & ~CLIENT_SSL, version: bytes = b"8.0.99"
) -> bytes:
    """A MySQL 8 style greeting (mysql_native_password) as a packet."""
    payload = (
        b"\x0a" + version + b"\0" + struct.pack("<I", 7) + b"abcdefgh\0"
        + struct.pack("<HBHH", capabilities & 0xFFFF, 33, 2, capabilities >> 16)
        + bytes([21]) + bytes(10) + b"ijklmnopqrst\0mysql_native_password\0"
    )  # fmt: skip
    return _packet(0, payload)


def _packet(sequence: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes([sequence]) + payload


def _read_packet(conn: socket.socket) -> bytes:
    header = _receive(conn, 4)
    return _receive(conn, int.from_bytes(header[:3], "little"))


def _receive(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def cleartext_asking_peer(
    switch: bytes, received: list[bytes], context: Any = None
) -> Callable[[socket.socket], None]:
    """Greets (offering TLS when given a server ``context``), takes the login, switches it to a
    plugin that wants the password in clear, and keeps all the client sends after that."""

    def answer(conn: socket.socket) -> None:
        caps = 0x81FF_F7FF | (CLIENT_SSL if context else 0)
        conn.sendall(peer_greeting(caps & ~(0 if context else CLIENT_SSL)))
        login = _read_packet(conn)
        if context is not None and len(login) == 32:  # an SSLRequest: TLS, then the login
            conn = context.wrap_socket(conn, server_side=True)
            _read_packet(conn)
            conn.sendall(_packet(3, b"\xfe" + switch))
        else:
            conn.sendall(_packet(2, b"\xfe" + switch))
        conn.settimeout(1.0)
        with contextlib.suppress(OSError):
            while data := conn.recv(65536):
                received.append(data)

    return answer


@pytest.mark.parametrize(
    "switch", [b"mysql_clear_password\0", b"dialog\0\x04Password: "], ids=["clear", "dialog"]
)
def test_query_mode_never_sends_the_password_in_clear_without_tls(switch: bytes) -> None:
    received: list[bytes] = []
    plugin = switch.split(b"\0")[0].decode()
    with scripted_peer(cleartext_asking_peer(switch, received)) as port:
        url = f"mysql://app:Cl3ar-S3cret@127.0.0.1:{port}/#mode=query"
        outcome = probe(url)
        time.sleep(0.2)  # whatever the client sent has arrived
        assert not any(b"Cl3ar-S3cret" in data for data in received), received
        assert outcome.permanent
        assert outcome.reason == (
            f"the server asks for the password in clear ({plugin}) over a connection without"
            " TLS; refusing (use a server with TLS, ssl-mode=REQUIRED)"
        )
        with pytest.raises(CheckFailed, match="refusing"):
            wait_for(url, timeout=10)


def test_query_mode_sends_the_cleartext_password_over_tls() -> None:
    """Encrypted, the cleartext plugins work as the mysql client lets them."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    received: list[bytes] = []
    peer = cleartext_asking_peer(b"mysql_clear_password\0", received, context)
    with scripted_peer(peer) as port:
        probe(f"mysql://app:Cl3ar-S3cret@127.0.0.1:{port}/?ssl-mode=REQUIRED#mode=query")
        time.sleep(0.2)
    assert b"Cl3ar-S3cret\0" in b"".join(received)
