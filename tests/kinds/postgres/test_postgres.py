"""PostgreSQL checks against real clusters, with pg_isready itself as the oracle for ping mode."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
import trustme

from tests.support.pg import Cluster
from tests.support.ports import free_port
from tests.support.servers import Script, banner_server, http_server, scripted_peer, started
from tests.support.waiting import assert_hidden_after_a_timeout
from waitfor import CheckFailed, TargetError, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kinds.postgres.ping import ping, tls_context

MakeCluster = Callable[[], Cluster]

pytestmark = pytest.mark.skipif(
    shutil.which("pg_isready") is None, reason="pg_isready (postgresql-client) is not installed"
)


NO_ATTEMPT = 3  # pg_isready's answer for invalid parameters; waitfor refuses them (exit 2)


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Both tools see the same environment: no PG* variables but the test's, an empty HOME."""
    for name in list(os.environ):
        if name.startswith("PG"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PGSYSCONFDIR", str(tmp_path / "sysconf"))  # not the machine's


def pg_isready(conninfo: str) -> int:
    """The oracle, run with this process's environment (which the test may have set)."""
    return subprocess.run(
        ["pg_isready", "-t", "3", "-d", conninfo], capture_output=True, timeout=30
    ).returncode


def waitfor_ping(conninfo: str) -> tuple[int, str]:
    try:
        target = parse_target(conninfo)
    except TargetError as exc:
        return NO_ATTEMPT, str(exc)
    params = dict(target.params)
    result = asyncio.run(ping(params, Deadline.after(3.0), lambda: tls_context(params)))
    return result.status.value, result.reason


def assert_parity(conninfo: str, expected: int) -> str:
    """Both tools give the expected pg_isready answer; returns waitfor's reason."""
    ours, reason = waitfor_ping(conninfo)
    assert (pg_isready(conninfo), ours) == (expected, expected), reason
    return reason


def scram_cluster(make: MakeCluster) -> Cluster:
    """A started cluster that asks TCP clients for a SCRAM password (local ones are trusted)."""
    cluster = make()
    cluster.hba("local all all trust", "host all all 127.0.0.1/32 scram-sha-256")
    cluster.start()
    return cluster


@pytest.fixture
def running(pg_cluster: MakeCluster) -> Cluster:
    return started(pg_cluster())


# --- the parity matrix ---------------------------------------------------------------------


def test_server_down() -> None:
    reason = assert_parity(f"postgresql://127.0.0.1:{free_port()}/postgres", 2)
    assert "connection refused" in reason


def test_accepting_with_trust(running: Cluster) -> None:
    assert assert_parity(running.url(), 0) == "accepting connections"


def test_accepting_with_password_auth_and_no_password(pg_cluster: MakeCluster) -> None:
    cluster = scram_cluster(pg_cluster)
    assert_parity(cluster.url(user="app"), 0)


def test_wrong_database_name(running: Cluster) -> None:
    assert_parity(running.url("no_such_db"), 0)  # trust auth answers before the database check


def test_unknown_role(running: Cluster) -> None:
    assert_parity(running.url(user="nobody"), 0)


def test_rejecting_standby_without_hot_standby(pg_cluster: MakeCluster) -> None:
    cluster = pg_cluster()
    cluster.configure(hot_standby="off")
    cluster.write_file("standby.signal", b"")
    cluster.start(wait=False)
    deadline = time.monotonic() + 20
    while pg_isready(cluster.url()) == 2 and time.monotonic() < deadline:
        time.sleep(0.1)  # until the postmaster listens
    reason = assert_parity(cluster.url(), 1)
    assert "rejecting connections: the database system is not accepting connections" in reason


def test_shutting_down(running: Cluster) -> None:
    holder = psycopg.connect(running.url(), autocommit=True)  # keeps a smart shutdown pending
    try:
        running.stop("smart", wait=False)
        deadline = time.monotonic() + 10
        while pg_isready(running.url()) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        reason = assert_parity(running.url(), 1)
        assert "shutting down" in reason
    finally:
        holder.close()


@pytest.fixture
def ssl_only(pg_cluster: MakeCluster) -> tuple[Cluster, trustme.CA]:
    ca = trustme.CA()
    cluster = pg_cluster()
    cluster.start_tls_only(ca, "127.0.0.1", "localhost")
    return cluster, ca


def test_ssl_only_server(ssl_only: tuple[Cluster, trustme.CA], tmp_path: Path) -> None:
    cluster, ca = ssl_only
    root = tmp_path / "root.crt"
    ca.cert_pem.write_to_path(str(root))
    assert assert_parity(cluster.url(), 0) == "accepting connections"  # sslmode=prefer
    assert_parity(cluster.url(extra="?sslmode=require"), 0)
    assert_parity(cluster.url(extra=f"?sslmode=verify-full&sslrootcert={root}"), 0)
    # Refused for lack of TLS, with a SQLSTATE: the server is up, as pg_isready says.
    reason = assert_parity(cluster.url(extra="?sslmode=disable"), 0)
    assert "no encryption" in reason


def test_verify_full_with_a_wrong_ca(ssl_only: tuple[Cluster, trustme.CA], tmp_path: Path) -> None:
    cluster, _ = ssl_only
    other = tmp_path / "other.crt"
    trustme.CA().cert_pem.write_to_path(str(other))
    reason = assert_parity(cluster.url(extra=f"?sslmode=verify-full&sslrootcert={other}"), 2)
    assert "certificate verify failed" in reason


def test_sslmode_require_against_a_server_without_ssl(running: Cluster) -> None:
    reason = assert_parity(running.url(extra="?sslmode=require"), 2)
    assert reason.endswith("server does not support SSL, but SSL was required")


def test_unix_socket(running: Cluster) -> None:
    assert_parity(f"host={running.sockets} port={running.port} user=postgres", 0)
    assert_parity(f"postgresql:///postgres?host={running.sockets}&port={running.port}", 0)


def test_non_postgres_listeners() -> None:
    with http_server(Script()) as (url, _):  # waits for a request line that never comes
        http_port = url.rsplit(":", 1)[1]
        assert "timed out" in assert_parity(f"postgresql://127.0.0.1:{http_port}/x", 2)
    with banner_server(b"220 mail.example ESMTP\r\n") as port:  # speaks first
        reason = assert_parity(f"postgresql://127.0.0.1:{port}/x", 2)
        assert reason.endswith("received invalid response to SSL negotiation: 2")
        reason = assert_parity(f"postgresql://127.0.0.1:{port}/x?sslmode=disable", 2)
        assert reason.endswith("expected authentication request from server, but received 2")


def test_silent_listener_is_no_response() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        started = time.monotonic()
        ours, reason = waitfor_ping(f"postgresql://127.0.0.1:{port}/x?connect_timeout=2")
        assert (ours, pg_isready(f"postgresql://127.0.0.1:{port}/x?connect_timeout=2")) == (2, 2)
    assert time.monotonic() - started < 10
    assert "timed out" in reason


def test_invalid_parameters_are_no_attempt() -> None:
    for conninfo in ("host=db foo=bar", "postgresql://db/x?sslmode=bogus"):
        assert pg_isready(conninfo) == 3
        with pytest.raises(TargetError):
            parse_target(conninfo)


def test_multiple_hosts_first_down_second_up(running: Cluster) -> None:
    assert_parity(f"host=127.0.0.1,127.0.0.1 port={free_port()},{running.port} user=postgres", 0)


def test_unix_sockets_ignore_sslmode(running: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq never asks for TLS over a Unix socket, whatever sslmode or PGSSLMODE say."""
    socket_dsn = f"host={running.sockets} port={running.port} user=postgres"
    for mode in ("require", "verify-ca", "verify-full"):  # and no root.crt anywhere
        assert_parity(f"{socket_dsn} sslmode={mode}", 0)
        monkeypatch.setenv("PGSSLMODE", mode)
        assert_parity(socket_dsn, 0)
        assert_parity(f"postgresql:///postgres?host={running.sockets}&port={running.port}", 0)
        monkeypatch.delenv("PGSSLMODE")
    # Over TCP the same string still insists on TLS, which this server does not offer.
    assert_parity(f"host=127.0.0.1 port={running.port} sslmode=require", 2)


def write_service_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_service_files(running: Cluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """service= and PGSERVICE, looked up where libpq looks, in libpq's order."""
    dead = free_port()
    live = f"host=127.0.0.1\nport={running.port}\nuser=postgres\n"
    # ~/.pg_service.conf first, then PGSYSCONFDIR/pg_service.conf
    write_service_file(Path(os.environ["HOME"], ".pg_service.conf"), f"[home]\n{live}")
    system = write_service_file(
        Path(os.environ["PGSYSCONFDIR"], "pg_service.conf"),
        f"# the system's\n[sys]\n{live}\n[dead]\nhost=127.0.0.1\nport={dead}\n"
        f"[home]\nhost=127.0.0.1\nport={dead}\n",
    )
    assert_parity("service=home", 0)  # found in ~ first, so the system's [home] is not read
    assert_parity("service=sys", 0)
    assert_parity("service=dead", 2)
    assert_parity(f"service=dead port={running.port}", 0)  # the string wins over the file
    assert_parity(f"postgresql://127.0.0.1:{running.port}/postgres?service=dead", 0)
    monkeypatch.setenv("PGPORT", str(dead))
    assert_parity("service=sys", 0)  # the file wins over the environment
    monkeypatch.delenv("PGPORT")
    monkeypatch.setenv("PGSERVICE", "sys")
    assert_parity("dbname=postgres", 0)
    monkeypatch.setenv("PGSERVICE", "dead")
    assert_parity("dbname=postgres", 2)
    monkeypatch.setenv("PGSERVICE", "nowhere")  # unknown: "no attempt", even with a host given
    assert_parity(f"host=127.0.0.1 port={running.port}", NO_ATTEMPT)
    monkeypatch.delenv("PGSERVICE")
    # PGSERVICEFILE replaces ~/.pg_service.conf; the system file is still the fallback.
    own = write_service_file(tmp_path / "own.conf", f"[own]\n{live}")
    monkeypatch.setenv("PGSERVICEFILE", str(own))
    assert_parity("service=own", 0)
    assert_parity("service=home", 2)  # now only the system's [home], the dead one
    assert_parity("service=sys", 0)
    monkeypatch.setenv("PGSERVICEFILE", str(tmp_path / "missing.conf"))
    assert_parity("service=sys", NO_ATTEMPT)  # named but missing: "service file not found"
    monkeypatch.delenv("PGSERVICEFILE")
    Path(os.environ["HOME"], ".pg_service.conf").unlink()
    Path(os.environ["HOME"], ".pg_service.conf").mkdir()  # unreadable as a file: skipped
    assert_parity("service=sys", 0)
    # Broken definitions are "no attempt": spaces around "=", unknown keywords, nesting.
    for body in ("host = 127.0.0.1", "colour=blue", "service=sys", "no equals sign"):
        system.write_text(f"[broken]\n{body}\n")
        assert_parity("service=broken", NO_ATTEMPT)
    system.write_text(f"junk before any section\n[other]\njunk\n[ok]\n{live}[after]\njunk\n")
    assert_parity("service=ok", 0)  # only the service's own lines are read


def test_requiressl(running: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old requiressl=1 means sslmode=require where it stands in the string; PGREQUIRESSL."""
    tcp = f"host=127.0.0.1 port={running.port} user=postgres"
    assert_parity(f"{tcp} requiressl=1", 2)  # this server has no TLS
    assert_parity(f"{tcp} requiressl=0", 0)
    assert_parity(f"{tcp} requiressl=1 sslmode=disable", 0)  # the later one wins
    assert_parity(f"{tcp} sslmode=disable requiressl=1", 2)
    assert_parity(f"{tcp} sslmode=require requiressl=0", 0)  # 0 means prefer
    assert_parity(f"postgresql://127.0.0.1:{running.port}/postgres?requiressl=1", 2)
    monkeypatch.setenv("PGREQUIRESSL", "1")
    assert_parity(tcp, 2)
    monkeypatch.setenv("PGSSLMODE", "disable")  # PGSSLMODE outranks PGREQUIRESSL
    assert_parity(tcp, 0)


def test_hostaddr_lists_pair_with_host_lists(running: Cluster) -> None:
    """Each hostaddr is used for its host slot, unresolved; an empty one means the host."""
    dead, live = free_port(), running.port
    common = "user=postgres"
    assert_parity(f"host=a.invalid,b.invalid hostaddr=127.0.0.1,127.0.0.1 port={dead},{live}", 0)
    assert_parity(f"host=a.invalid,b.invalid hostaddr=127.0.0.1,127.0.0.1 port={live},{dead}", 0)
    assert_parity(f"host=a.invalid hostaddr=127.0.0.1 port={dead} {common}", 2)
    assert_parity(f"host=/no/such/dir hostaddr=127.0.0.1 port={live} {common}", 0)  # TCP
    assert_parity(f"host=127.0.0.1,{running.sockets} hostaddr=127.0.0.1, port={dead},{live}", 0)
    assert_parity(f"host=a,b hostaddr=127.0.0.1 port={live}", NO_ATTEMPT)
    assert_parity(f"hostaddr=127.0.0.1,127.0.0.1 port={live}", NO_ATTEMPT)  # one default host


def test_empty_port_and_host_entries(running: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty port is 5432 (not PGPORT); an empty host is the default socket directory."""
    sockets, live = running.sockets, running.port
    assert_parity(f"host={sockets},{sockets} port=,{live} user=postgres", 0)
    assert_parity(f"host={sockets} user=postgres port=", 2)  # nobody at 5432 in there
    monkeypatch.setenv("PGPORT", str(live))
    assert_parity(f"host={sockets} user=postgres port=", 2)  # given, so PGPORT does not apply
    assert_parity(f"host={sockets} user=postgres", 0)
    monkeypatch.delenv("PGPORT")
    default_socket = Path("/var/run/postgresql/.s.PGSQL.5432")
    if default_socket.is_socket():  # a server at libpq's defaults (this machine's shared one)
        assert_parity("host=/var/run/postgresql port=", 0)
        assert_parity(f"host=127.0.0.1,,127.0.0.1 port={free_port()},5432,{free_port()}", 0)
        monkeypatch.setenv("PGHOST", "")  # set but empty: the default, as in libpq
        assert_parity("port=5432", 0)


def test_missing_client_certificate_files(
    ssl_only: tuple[Cluster, trustme.CA], tmp_path: Path
) -> None:
    """libpq sends no client certificate when the named files do not exist; it still pings."""
    cluster, _ = ssl_only
    missing = f"sslcert={tmp_path}/none.crt sslkey={tmp_path}/none.key"
    tcp = f"host=127.0.0.1 port={cluster.port} user=postgres"
    assert_parity(f"{tcp} {missing} sslmode=require", 0)
    assert_parity(f"{tcp} {missing}", 0)
    assert_parity(f"{tcp} sslcert={tmp_path}/none.crt", 0)


def test_bytes_injected_after_the_ssl_answer_are_refused(tmp_path: Path) -> None:
    """CVE-2021-23222: a man in the middle answers 'S' and, in the same write, a fake
    AuthenticationOk, then relays the real TLS handshake. Those bytes did not come through
    TLS: libpq refuses them, and so must we (else "accepting" could be faked)."""
    ca = trustme.CA()
    with fake_tls_server(ca, inject=b"") as port:  # control: the same server, nothing injected
        assert_parity(f"host=127.0.0.1 port={port} sslmode=require", 0)
    with fake_tls_server(ca, inject=AUTHENTICATION_OK) as port:
        for mode in ("require", "prefer"):
            reason = assert_parity(f"host=127.0.0.1 port={port} sslmode={mode}", 2)
            assert reason.endswith("received unencrypted data after SSL response")


AUTHENTICATION_OK = b"R\0\0\0\x08\0\0\0\0" + b"Z\0\0\0\x05I"


@contextmanager
def fake_tls_server(ca: trustme.CA, inject: bytes) -> Iterator[int]:
    """Answers SSLRequest with 'S' (plus ``inject`` in the same write), does a real TLS
    handshake, then says AuthenticationOk inside TLS only when nothing was injected."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("127.0.0.1").configure_cert(context)

    def serve_one(conn: socket.socket) -> None:
        if conn.recv(8) != b"\0\0\0\x08\x04\xd2\x16\x2f":  # not an SSLRequest
            return
        conn.sendall(b"S" + inject)
        with context.wrap_socket(conn, server_side=True) as tls:
            if not tls.recv(4):  # the start-up message's length, or the client gave up
                return
            if not inject:
                tls.sendall(AUTHENTICATION_OK)
            while tls.recv(1024):
                pass

    with scripted_peer(serve_one) as port:
        yield port


# --- waiting ---------------------------------------------------------------------------------


def start_later(cluster: Cluster, seconds: float) -> threading.Thread:
    def start() -> None:
        time.sleep(seconds)
        cluster.start()

    thread = threading.Thread(target=start)
    thread.start()
    return thread


def test_waits_for_a_cluster_started_later(pg_cluster: MakeCluster) -> None:
    cluster = pg_cluster()
    starter = start_later(cluster, 1.0)
    results = wait_for(cluster.url(), timeout=30)
    starter.join()
    assert results[0].ready
    assert results[0].attempts > 1


def test_cli_ping_exit_codes(running: Cluster) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "waitfor", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30)

    assert run(running.url()).returncode == 0
    down = run("-t", "0.5", f"postgres://127.0.0.1:{free_port()}/x")
    assert down.returncode == 124
    assert "could not connect: connection refused" in down.stderr
    bad = run("host=db sslmode=nope")
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1)
    assert "invalid sslmode 'nope'" in bad.stderr


def test_passwords_never_shown(pg_cluster: MakeCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSWORD", "envs3cret")
    texts = [
        f"postgresql://app:s3cret@127.0.0.1:{free_port()}/db",
        f"host=127.0.0.1 port={free_port()} password='s3cret' user=app",
        f"postgresql://app@127.0.0.1:{free_port()}/db",
    ]
    assert_hidden_after_a_timeout(texts, ["s3cret"], "127.0.0.1")


# --- query mode ------------------------------------------------------------------------------


def test_query_mode_trust(running: Cluster) -> None:
    [result] = wait_for(running.url(extra="#mode=query"), timeout=10)
    assert result.reason == "SELECT 1 succeeded"


def test_query_mode_waits_for_the_database_to_be_created(running: Cluster) -> None:
    threading.Timer(1.0, lambda: running.psql("CREATE DATABASE appdb")).start()
    events: list[str] = []
    results = wait_for(
        running.url("appdb", extra="#mode=query"),
        timeout=20,
        on_event=lambda e: events.append(e.reason),
    )
    assert results[0].ready
    assert any('database "appdb" does not exist' in reason for reason in events)
    # ping mode said "up" all along: the server was accepting connections
    assert waitfor_ping(running.url("appdb"))[0] == 0


def refused_until_fixed(make: MakeCluster, role: str, login: str, fix: str) -> WaitTimeout:
    """On a SCRAM cluster with ``role`` made, query mode logging in as ``login`` (USER:PASSWORD)
    times out in 1.5 s (its WaitTimeout, returned), and is ready once ``fix`` is run."""
    cluster = scram_cluster(make)
    cluster.psql(role)
    url = f"postgresql://{login}@127.0.0.1:{cluster.port}/postgres#mode=query"
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=1.5)
    threading.Timer(0.5, lambda: cluster.psql(fix)).start()
    assert wait_for(url, timeout=10)[0].ready
    return info.value


def test_query_mode_wrong_password_is_retried_and_reported(pg_cluster: MakeCluster) -> None:
    role, fix = "CREATE ROLE app LOGIN PASSWORD 'right'", "ALTER ROLE app PASSWORD 'wrong'"
    timeout = refused_until_fixed(pg_cluster, role, "app:wrong", fix)
    [result] = timeout.results
    assert result.attempts > 1  # retried: the role's password may be set after the server starts
    assert result.reason.startswith("authentication failed:")
    assert "wrong" not in str(timeout)


def test_query_mode_judges_login_failures_by_sqlstate(pg_cluster: MakeCluster) -> None:
    """A role that may not log in (28000) is an authentication failure too, and is retried:
    not something to recognise by its English words."""
    timeout = refused_until_fixed(
        pg_cluster, "CREATE ROLE late NOLOGIN PASSWORD 'pw'", "late:pw", "ALTER ROLE late LOGIN"
    )
    [result] = timeout.results
    assert result.reason.startswith("authentication failed:"), result.reason
    assert "28000" not in result.reason  # the code is for judging; the words are for people


GERMAN_28P01 = "Passwort-Authentifizierung für Benutzer »app« fehlgeschlagen"


def test_query_mode_login_failures_in_another_language() -> None:
    """A server whose lc_messages is German: the SQLSTATE still says what happened."""
    with password_server(GERMAN_28P01) as port:
        url = f"postgresql://app:pw@127.0.0.1:{port}/x?sslmode=disable#mode=query"
        with pytest.raises(WaitTimeout) as info:
            wait_for(url, timeout=1.5)
        [result] = info.value.results
        assert result.attempts > 1
        assert result.reason.startswith("authentication failed:"), result.reason
        assert GERMAN_28P01 in result.reason
        # No password at all: libpq's own flag says so (no message text involved): exit 2.
        with pytest.raises(CheckFailed, match="asks for a password and none was given"):
            wait_for(f"postgresql://app@127.0.0.1:{port}/x?sslmode=disable#mode=query", timeout=5)


@contextmanager
def password_server(message: str) -> Iterator[int]:
    """Asks every client for a cleartext password, then refuses it with 28P01 and ``message``."""

    def serve_one(conn: socket.socket) -> None:
        try:
            (length,) = struct.unpack("!i", conn.recv(4, socket.MSG_WAITALL))
        except struct.error:
            return  # the client hung up first
        conn.recv(length - 4, socket.MSG_WAITALL)  # the start-up message
        conn.sendall(b"R" + struct.pack("!ii", 8, 3))  # AuthenticationCleartextPassword
        if not conn.recv(1024):
            return  # libpq had no password to send
        fields = [b"SFATAL", b"VFATAL", b"C28P01", b"M" + message.encode()]
        body = b"".join(field + b"\0" for field in fields) + b"\0"
        conn.sendall(b"E" + struct.pack("!i", len(body) + 4) + body)

    with scripted_peer(serve_one) as port:
        yield port


def test_query_mode_without_password_is_a_configuration_error(pg_cluster: MakeCluster) -> None:
    cluster = scram_cluster(pg_cluster)
    with pytest.raises(CheckFailed, match="asks for a password and none was given"):
        wait_for(f"postgresql://app@127.0.0.1:{cluster.port}/postgres#mode=query", timeout=10)


def test_query_mode_primary_refuses_a_standby_until_promoted(pg_cluster: MakeCluster) -> None:
    cluster = pg_cluster()
    cluster.configure(hot_standby="on")
    cluster.write_file("standby.signal", b"")
    cluster.start()
    url = cluster.url(extra="#mode=query&primary")
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=1)
    assert (
        info.value.results[0].reason == "server is a standby (in recovery); waiting for a primary"
    )
    assert wait_for(cluster.url(extra="#mode=query"), timeout=10)[0].ready  # it does answer
    threading.Timer(0.5, lambda: cluster.pg_ctl("promote")).start()
    assert wait_for(url, timeout=20)[0].ready


def test_query_mode_options_are_validated() -> None:
    with pytest.raises(TargetError, match="primary needs mode=query"):
        parse_target("postgresql://db/x#primary")
    with pytest.raises(TargetError, match="mode must be ping or query"):
        parse_target("postgresql://db/x#mode=login")


def test_a_missing_root_certificate_is_a_configuration_error(
    ssl_only: tuple[Cluster, trustme.CA], running: Cluster, tmp_path: Path
) -> None:
    """Read when the server agrees to TLS, as libpq does; then no retry can help (exit 2)."""
    cluster, _ = ssl_only
    missing = f"?sslmode=verify-full&sslrootcert={tmp_path}/none.crt"
    with pytest.raises(CheckFailed, match="root certificate file"):
        wait_for(cluster.url(extra=missing), timeout=10)
    with pytest.raises(WaitTimeout, match="server does not support SSL"):  # asked, refused
        wait_for(running.url(extra=missing), timeout=1)
    assert isinstance(tls_context({"sslmode": "prefer"}), ssl.SSLContext)


def test_a_client_certificate_without_its_key_is_a_configuration_error(
    ssl_only: tuple[Cluster, trustme.CA], tmp_path: Path
) -> None:
    cluster, ca = ssl_only
    cert = tmp_path / "client.crt"
    ca.issue_cert("client").cert_chain_pems[0].write_to_path(str(cert))
    url = cluster.url(extra=f"?sslmode=require&sslcert={cert}&sslkey={tmp_path}/none.key")
    with pytest.raises(CheckFailed, match="certificate present, but not private key file"):
        wait_for(url, timeout=10)


def test_targets_with_the_same_tls_settings_share_one_context(tmp_path: Path) -> None:
    ca = trustme.CA()
    root = tmp_path / "root.crt"
    ca.cert_pem.write_to_path(str(root))
    params = {"sslmode": "verify-full", "sslrootcert": str(root)}
    first = tls_context(dict(params, host="a"))
    assert tls_context(dict(params, host="b")) is first  # the CA file is read once
    assert tls_context({**params, "sslmode": "verify-ca"}) is not first
