"""No secret in any output: every kind, every output mode, and the library's exceptions."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.brokers import RABBITMQ_PORT
from tests.support.command import waitfor
from tests.support.dnsserver import DnsServer
from tests.support.pg import Cluster
from tests.support.ports import free_port, free_ports
from tests.support.servers import listening
from waitfor import WaitTimeout, wait_for

SECRETS = (
    "pw-userinfo-1",
    "tok-query-2",
    "auth-hdr-3",
    "cookie-4",
    "pg-uri-5",
    "dsn-pass-6",
    "env-pass-7",
    "wrong-pass-8",
    "apikey-9",
    "vault-10",
    "quote #11",
    "at-12",
    "mysql-pass-13",
    "redis-pass-14",
    "memcached-pass-15",
    "amqp-pass-16",
    "mqtt-pass-17",
    "nats-token-18",
    "nats-pass-19",
    "exec-pass-20",
    "unix-tok-21",
    "unix-auth-22",
    "proxy-pass-23",
    "sql-pass-24",
    "table-pass-25",
    "value-pass-26",
)


@pytest.fixture
def secret_targets(
    pg_cluster: Callable[[], Cluster], dns_server: DnsServer, tmp_path: Path
) -> tuple[list[str], list[str]]:
    """(targets, the host:port each must still show), all failing, each holding secrets."""
    cluster = pg_cluster()
    cluster.hba("local all all trust", "host all all 127.0.0.1/32 scram-sha-256")
    cluster.start()
    cluster.psql("CREATE ROLE app LOGIN PASSWORD 'right'")
    dns_server.start()
    http, pg, dsn, env = free_port(), free_port(), free_port(), free_port()
    quoted, raw_at, word = free_port(), free_port(), free_port()
    mqtt, nats = free_ports(2)
    proxy = free_port()
    targets = [
        f"http://admin:pw-userinfo-1@127.0.0.1:{http}/health?token=tok-query-2"
        "#header=Authorization:%20Bearer%20auth-hdr-3&header=Cookie:%20session=cookie-4"
        "&header=X-Api-Key:%20apikey-9&header=X-Vault-Token:%20vault-10",
        f"host=127.0.0.1 port={quoted} user=app password='it\\'s quote #11' dbname=x",
        f"postgresql://app:raw@at-12@127.0.0.1:{raw_at}/db?sslmode=disable",
        f"postgresql://postgres:postgres@127.0.0.1:{word}/postgres",
        f"postgresql://app:pg-uri-5@127.0.0.1:{pg}/db?sslmode=disable",
        f"host=127.0.0.1 port={dsn} user=app password='dsn-pass-6' dbname=x",
        f"postgresql://app@127.0.0.1:{env}/db#mode=query",  # PGPASSWORD
        f"postgresql://app:wrong-pass-8@127.0.0.1:{cluster.port}/postgres#mode=query",
        f"tcp://127.0.0.1:{free_port()}",
        f"dns://{dns_server.address}/missing.test",
        f"mysql://app:mysql-pass-13@127.0.0.1:{free_port()}/db?ssl-mode=REQUIRED#mode=query",
        f"rediss://app:redis-pass-14@127.0.0.1:{free_port()}/1#key=k",
        # the expectations of #38: a query, a table, a key's value beside a password
        f"mysql://app:sql-pass-24@127.0.0.1:{free_port()}/db#sql=SELECT%20COUNT(*)%20%3E%200%20FROM%20t",
        f"postgresql://app:table-pass-25@127.0.0.1:{free_port()}/db#table=app.t&sql=SELECT%20true",
        f"redis://:value-pass-26@127.0.0.1:{free_port()}#key=k&value=%5Eready$",
        f"memcached://app:memcached-pass-15@127.0.0.1:{free_port()}",
        f"mqtts://app:mqtt-pass-17@127.0.0.1:{mqtt}",
        f"nats://nats-token-18@127.0.0.1:{nats}",
        f"tls://app:nats-pass-19@127.0.0.1:{nats}#jetstream",
        # a command that prints the secret it was given: its output is the reason
        "exec:sh -c 'echo \"login with $1 failed\"; exit 1' sh --password=exec-pass-20",
        f"http+unix://{quote(str(tmp_path / 'none.sock'), safe='')}/health?token=unix-tok-21"
        "#header=Authorization:%20Bearer%20unix-auth-22",
        f"https://127.0.0.1:{free_port()}/#proxy=http://px:proxy-pass-23@127.0.0.1:{proxy}",
    ]
    shown = [f"127.0.0.1:{p}" for p in (http, pg)] + [f"port={dsn}", f"127.0.0.1:{env}"]
    shown += [f"port={quoted}", f"127.0.0.1:{raw_at}"]
    # a password equal to words around it: the display is built, not searched and replaced
    shown += [f"postgresql://postgres:***@127.0.0.1:{word}/postgres"]
    shown += [f"127.0.0.1:{mqtt}", f"127.0.0.1:{nats}"]
    if listening(RABBITMQ_PORT):  # a refused login at a real broker: the reason is told
        targets.append(f"amqp://waitfor-nobody:amqp-pass-16@127.0.0.1:{RABBITMQ_PORT}/app")
        shown.append(f"127.0.0.1:{RABBITMQ_PORT}")
    shown += ["failed", "none.sock", f"through proxy http://127.0.0.1:{proxy}"]
    return targets, [*shown, f"127.0.0.1:{cluster.port}", dns_server.address]


@pytest.mark.parametrize("mode", ["text", "tty", "json", "quiet"])
def test_no_secret_in_any_output_mode(
    mode: str, secret_targets: tuple[list[str], list[str]]
) -> None:
    targets, shown = secret_targets
    result = subprocess.run(
        # 4 s: twenty kinds import their protocol code on the event loop at their first
        # attempt; on a busy machine the refused login must still get its turn to be told.
        [sys.executable, "-m", "waitfor", "-o", mode, "-t", "4", *targets],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PGPASSWORD": "env-pass-7"},
    )
    assert result.returncode == 124, result.stderr
    output = result.stdout + result.stderr
    for secret in SECRETS:
        assert secret not in output, f"{secret} leaked in {mode} output"
    for address in shown:
        assert address in output, f"{address} missing from {mode} output"
    assert "authentication failed" in output  # the reason itself is still told


def test_no_secret_in_library_exceptions(
    secret_targets: tuple[list[str], list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    targets, shown = secret_targets
    monkeypatch.setenv("PGPASSWORD", "env-pass-7")
    with pytest.raises(WaitTimeout) as info:
        wait_for(*targets, timeout=1.5)
    texts = [str(info.value), repr(info.value), repr(info.value.results)]
    texts += [f"{r.target} {r.target!r} {r.reason}" for r in info.value.results]
    for secret in SECRETS:
        assert not any(secret in text for text in texts), secret
    assert all(address in str(info.value) for address in shown)


@pytest.mark.parametrize(
    "target",
    [
        "postgresql://app:hash#tail-13@127.0.0.1:1/db",
        "http://app:99#tail-13@127.0.0.1:1/",
        "host=127.0.0.1 password=space tail-13",
        "http://127.0.0.1:1/#header=X-Api-Key:%20tail-13&status=bogus",
        "http://127.0.0.1:1/#header=X-Api-Key:%20t%C3%A1il-13",
        "grpc://user:tail-13@127.0.0.1:1",
        "http+unix://u:tail-13@%2Frun%2Fa.sock/",
        "exec:sh -c 'unclosed --password=tail-13",
    ],
)
def test_no_secret_in_configuration_errors(target: str) -> None:
    result = waitfor("-t", "1", target, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("waitfor: error: invalid target")
    assert "tail" not in result.stderr, result.stderr
    assert "il-13" not in result.stderr, result.stderr
