"""Redis checks against real redis-server processes, with ``redis-cli ping`` as the oracle.

The oracle is the shell loop people write, ``until redis-cli ping | grep -q PONG``: ready when
redis-cli prints PONG.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import trustme

from tests.support.attempts import assert_first_attempt_as_runner, probe
from tests.support.ports import free_port
from tests.support.redisd import RedisServer, unavailable_reason
from tests.support.servers import Script, banner_server, http_server, server_factory, started
from waitfor import CheckFailed, TargetError, WaitTimeout, parse_target, wait_for
from waitfor.base.deadline import Deadline
from waitfor.kind import Outcome
from waitfor.kinds.redis.check import RedisCheck

pytestmark = pytest.mark.skipif(
    unavailable_reason("redis-server", "redis-cli") is not None,
    reason=str(unavailable_reason("redis-server", "redis-cli")),
)

MakeServer = Callable[..., RedisServer]


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[MakeServer]:
    """A factory of stopped redis-servers (arguments are redis-server's); stopped afterwards."""
    with server_factory(RedisServer, tmp_path) as make:
        yield make


def redis_cli_ready(port: int, *options: str) -> bool:
    command = ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--no-auth-warning", *options]
    result = subprocess.run([*command, "ping"], capture_output=True, text=True, timeout=30)
    return "PONG" in result.stdout


def assert_parity(url: str, port: int, *options: str) -> Outcome:
    outcome = probe(url)
    assert (redis_cli_ready(port, *options), outcome.ready) == (outcome.ready,) * 2, outcome.reason
    return outcome


@pytest.fixture
def running(redis: MakeServer) -> RedisServer:
    return started(redis())


@pytest.fixture
def protected(redis: MakeServer) -> RedisServer:
    server = redis("--requirepass", "right-pass")
    server.start()
    return server


# --- the parity matrix with redis-cli ping ----------------------------------------------------


def test_server_down() -> None:
    port = free_port()
    outcome = assert_parity(f"redis://127.0.0.1:{port}", port)
    assert "connection refused" in outcome.reason


def test_pong(running: RedisServer) -> None:
    assert assert_parity(f"redis://127.0.0.1:{running.port}", running.port).reason == "PONG"


def test_the_machines_shared_server() -> None:
    if not redis_cli_ready(6379):
        pytest.skip("no Redis on 127.0.0.1:6379")
    assert assert_parity("redis://127.0.0.1:6379", 6379).ready


def test_password(protected: RedisServer) -> None:
    port = protected.port
    assert assert_parity(f"redis://:right-pass@127.0.0.1:{port}", port, "-a", "right-pass").ready
    wrong = assert_parity(f"redis://:wrong-pass@127.0.0.1:{port}", port, "-a", "wrong-pass")
    assert wrong.reason.startswith("authentication failed: WRONGPASS")
    assert "wrong-pass" not in wrong.reason


def test_noauth_without_credentials_is_up_in_ping_mode(protected: RedisServer) -> None:
    # Documented difference (docs/kinds/redis.md): the server is up and serving, as pg_isready
    # says of a server that asks for a password; redis-cli prints the NOAUTH error instead of PONG.
    outcome = probe(f"redis://127.0.0.1:{protected.port}")
    assert (outcome.ready, redis_cli_ready(protected.port)) == (True, False)
    assert outcome.reason == "server is up (it requires a password: NOAUTH)"
    for logs_in in ("mode=query", "key=k", "role=master"):
        with pytest.raises(CheckFailed, match="requires a password and none was given"):
            wait_for(f"redis://127.0.0.1:{protected.port}#{logs_in}", timeout=10)


def test_acl_user(running: RedisServer) -> None:
    running.cli("ACL", "SETUSER", "app", "on", ">app-pass", "~*", "+@all")
    port = running.port
    url = f"redis://app:app-pass@127.0.0.1:{port}"
    assert assert_parity(url, port, "--user", "app", "-a", "app-pass").ready
    assert probe(f"{url}#mode=query").reason == "logged in, PONG"
    # no credentials, no login to claim (the default user's PING)
    assert probe(f"redis://127.0.0.1:{port}#mode=query").reason == "PONG"
    refused = probe(f"redis://app:nope-pass@127.0.0.1:{port}#mode=query")
    assert refused.reason.startswith("authentication failed: WRONGPASS")


def test_loading_after_a_restart_with_a_dataset(redis: MakeServer) -> None:
    server = redis("--enable-debug-command", "yes")
    server.start()
    server.cli("DEBUG", "POPULATE", "80000", "key", "16")
    assert server.cli("SAVE") == "OK"
    server.stop()
    # 25 us a key (slept as 25-100 us by the kernel's timers): 2-8 s of -LOADING (200,000 keys
    # were 28 s of the test); answering clients every KiB loaded.
    server.settings += ["--key-load-delay", "25", "--loading-process-events-interval-bytes", "1024"]
    server.start()
    url = f"redis://127.0.0.1:{server.port}"
    outcome = assert_parity(url, server.port)
    assert outcome.reason == "LOADING Redis is loading the dataset in memory"
    events: list[str] = []
    [result] = wait_for(url, timeout=60, on_event=lambda e: events.append(e.reason))
    assert result.ready
    assert "LOADING Redis is loading the dataset in memory" in events
    assert server.cli("DBSIZE") == "80000"


def test_busy_script(redis: MakeServer) -> None:
    server = redis("--busy-reply-threshold", "100")
    server.start()
    script = subprocess.Popen(
        ["redis-cli", "-p", str(server.port), "EVAL", "while true do end", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        outcome = probe(f"redis://127.0.0.1:{server.port}")
        while outcome.ready and time.monotonic() < deadline:
            time.sleep(0.05)
            outcome = probe(f"redis://127.0.0.1:{server.port}")
        assert outcome.reason.startswith("BUSY Redis is busy running a script")
        assert not redis_cli_ready(server.port)
    finally:
        server.cli("SCRIPT", "KILL")
        script.wait(30)
    assert probe(f"redis://127.0.0.1:{server.port}").ready


def test_masterdown_replica_then_role_master(redis: MakeServer) -> None:
    replica = redis(
        "--replicaof", "127.0.0.1", str(free_port()), "--replica-serve-stale-data", "no"
    )
    replica.start()
    url = f"redis://127.0.0.1:{replica.port}"
    outcome = assert_parity(url, replica.port)
    assert outcome.reason.startswith("MASTERDOWN Link with MASTER is down")
    # A replica that serves stale data answers PING, but is no writable primary.
    replica.cli("CONFIG", "SET", "replica-serve-stale-data", "yes")
    assert assert_parity(url, replica.port).ready
    with pytest.raises(WaitTimeout) as info:
        wait_for(f"{url}#role=master", timeout=1)
    assert info.value.results[0].reason == "not a primary (role:slave); waiting for role:master"
    threading.Timer(0.5, lambda: replica.cli("REPLICAOF", "NO", "ONE")).start()
    [result] = wait_for(f"{url}#role=master", timeout=20)
    # names the role it checked, and claims no login: this URL has no password
    assert result.reason == "PONG, role master"
    replica.cli("SET", "k", "1")
    assert probe(f"{url}#role=master&key=k").reason == "role master, key 'k' exists"


def test_non_redis_listeners() -> None:
    with http_server(Script()) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        outcome = assert_parity(f"redis://127.0.0.1:{port}", port)
        assert outcome.reason.startswith("not a Redis server (it answered ")
    with banner_server(b"220 mail.example ESMTP\r\n") as port:
        outcome = assert_parity(f"redis://127.0.0.1:{port}", port)
        assert outcome.reason == "not a Redis server (it answered '220 mail.example ESM')"
    with banner_server(b"220 mail.example") as port:  # hangs up in the middle of a line
        outcome = assert_parity(f"redis://127.0.0.1:{port}", port)
        assert outcome.reason == "not a Redis server (it answered '220 mail.example')"


def test_deeply_nested_answers_are_refused() -> None:
    with banner_server(b"*1\r\n" * 5000) as port:  # each level is a frame: no RecursionError
        check = RedisCheck(parse_target(f"redis://127.0.0.1:{port}"))
        reason = "answer nested too deeply for a Redis health check"
        assert asyncio.run(check.probe(Deadline.after(2.0))) == Outcome.down(reason)
        assert check.probe_now(Deadline.after(2.0)) is None


# --- logging in, keys, databases ---------------------------------------------------------------


def test_wrong_password_is_retried_until_it_is_set(protected: RedisServer) -> None:
    url = f"redis://:new-pass-5@127.0.0.1:{protected.port}#mode=query"
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=1.2)
    assert info.value.results[0].attempts > 1
    assert "new-pass-5" not in f"{info.value} {info.value.results}"
    change = ("CONFIG", "SET", "requirepass", "new-pass-5")
    threading.Timer(0.5, lambda: protected.cli(*change, password="right-pass")).start()
    assert wait_for(url, timeout=20)[0].ready


def test_key_appears_in_the_urls_database(running: RedisServer) -> None:
    url = f"redis://127.0.0.1:{running.port}/3#key=session:ready"
    running.cli("SET", "session:ready", "1")  # in database 0: not the one asked for
    with pytest.raises(WaitTimeout) as info:
        wait_for(url, timeout=1)
    assert info.value.results[0].reason == "key 'session:ready' does not exist yet"
    assert "session:ready" in str(parse_target(url))  # a key is a name, not a secret
    threading.Timer(0.5, lambda: running.cli("-n", "3", "SET", "session:ready", "1")).start()
    assert wait_for(url, timeout=20)[0].reason == "key 'session:ready' exists"


def test_query_mode_selects_the_database(redis: MakeServer) -> None:
    server = redis("--databases", "4")
    server.start()
    assert probe(f"redis://127.0.0.1:{server.port}/3#mode=query").ready
    refused = probe(f"redis://127.0.0.1:{server.port}/9#mode=query")
    assert refused.reason == "SELECT 9: ERR DB index is out of range"


def take_the_one_slot(port: int) -> socket.socket:
    """A logged-in client holding a maxclients-1 server's slot, once the start-up check's own
    connection (closed, but maybe not yet seen closed by the server) has left it."""
    deadline = time.monotonic() + 10
    while True:
        holder = socket.create_connection(("127.0.0.1", port))
        holder.sendall(b"AUTH pw-1\r\n")
        if holder.recv(100) == b"+OK\r\n":
            return holder
        holder.close()
        assert time.monotonic() < deadline, "the slot never freed"
        time.sleep(0.02)


def test_max_clients_is_the_reason_even_with_a_password(redis: MakeServer) -> None:
    server = redis("--maxclients", "1", "--requirepass", "pw-1")
    server.start()
    holder = take_the_one_slot(server.port)
    try:
        url = f"redis://:pw-1@127.0.0.1:{server.port}"
        outcome = assert_parity(url, server.port, "-a", "pw-1")
        assert outcome.reason == "ERR max number of clients reached"
    finally:
        holder.close()
    assert wait_for(url, timeout=10)[0].ready


def test_auth_against_a_server_without_password(running: RedisServer) -> None:
    url = f"redis://:unneeded@127.0.0.1:{running.port}"
    assert assert_parity(url, running.port, "-a", "unneeded").ready  # PING answers: up
    refused = probe(f"{url}#mode=query")  # the app's AUTH would fail the same way
    assert refused.reason.startswith("authentication failed: ERR AUTH <password> called without")


def test_first_attempt_without_the_event_loop_answers_as_the_runner(
    redis: MakeServer,
) -> None:
    """probe_now (the cold-start path) gives probe's outcome when ready, else leaves it (None)."""
    server = redis("--requirepass", "right-pass", "--databases", "4")
    server.start()
    server.cli("SET", "here", "1", password="right-pass")
    address = f"127.0.0.1:{server.port}"
    ready = [
        f"redis://:right-pass@{address}",
        f"redis://{address}",  # up, it requires a password
        f"redis://:right-pass@{address}/0#key=here&role=master",
        f"redis://:right-pass@{address}/3#mode=query",
    ]
    not_ready = [
        f"redis://:wrong-pass@{address}#mode=query",
        f"redis://:right-pass@{address}#key=missing",
        f"redis://:right-pass@{address}/9#mode=query",
        f"redis://{address}#mode=query",  # a configuration error: the runner says so
        f"redis://127.0.0.1:{free_port()}",
    ]
    assert_first_attempt_as_runner(ready, not_ready)
    with banner_server(b"220 mail.example ESMTP\r\n") as port:
        assert (
            RedisCheck(parse_target(f"redis://127.0.0.1:{port}")).probe_now(Deadline.after(2.0))
            is None
        )
    assert (
        RedisCheck(parse_target(f"rediss://{address}#insecure")).probe_now(Deadline.after(2.0))
        is None
    )


# --- TLS ---------------------------------------------------------------------------------------


def test_rediss(redis: MakeServer, tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "server.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    server = redis(
        "--tls-cert-file",
        str(tmp_path / "server.crt"),
        "--tls-key-file",
        str(tmp_path / "server.key"),
        "--tls-ca-cert-file",
        str(tmp_path / "ca.crt"),
        "--tls-auth-clients",
        "no",
    )
    server.tls = True
    server.start()
    port = server.port
    cacert = f"rediss://127.0.0.1:{port}#cacert={tmp_path / 'ca.crt'}"
    assert assert_parity(cacert, port, "--tls", "--cacert", str(tmp_path / "ca.crt")).ready
    assert probe(f"rediss://127.0.0.1:{port}#insecure").ready
    untrusted = assert_parity(f"rediss://127.0.0.1:{port}", port, "--tls")
    assert "certificate" in untrusted.reason
    plaintext = probe(f"redis://127.0.0.1:{port}", 1.0)
    assert not plaintext.ready


# --- targets -----------------------------------------------------------------------------------


def test_targets_and_secrets() -> None:
    assert str(parse_target("redis://db")) == "redis://db:6379"
    assert str(parse_target("rediss://u:p@[::1]:6380/2")) == "rediss://u:***@[::1]:6380/2"
    lone = parse_target("redis://only-secret@db")  # redis-cli takes a lone userinfo as password
    assert (str(lone), dict(lone.params)["password"]) == ("redis://***@db:6379", "only-secret")
    for bad, message in (
        ("redis://db/x", "database number"),
        ("redis://db?db=1", "no query parameters"),
        ("redis://db#role=replica", "role must be master"),
        ("redis://db#mode=sure", "mode must be ping or query"),
        ("redis://db#key=", "key needs a name"),
        ("redis://:%FF@db", "password is not valid UTF-8"),  # a login that could never succeed
        ("redis://%FF@db", "password is not valid UTF-8"),  # the lone userinfo is the password
        ("redis://%C3%28:p@db", "user is not valid UTF-8"),
    ):
        with pytest.raises(TargetError, match=message):
            parse_target(bad)
    for text in (
        f"redis://:r-s3cret@127.0.0.1:{free_port()}",
        f"rediss://u:r-s3cret@127.0.0.1:{free_port()}/1#mode=query",
    ):
        target = parse_target(text)
        with pytest.raises(WaitTimeout) as info:
            wait_for(target, timeout=0.3)
        assert "r-s3cret" not in f"{target} {target!r} {info.value} {info.value.results}"


def test_cli_exit_codes(protected: RedisServer) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "waitfor", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=30)

    assert run(f"redis://127.0.0.1:{protected.port}").returncode == 0
    fatal = run(f"redis://127.0.0.1:{protected.port}#mode=query")
    assert fatal.returncode == 2
    assert "requires a password and none was given" in fatal.stderr.splitlines()[-1]
    assert run("-t", "0.5", f"redis://:x@127.0.0.1:{protected.port}").returncode == 124
