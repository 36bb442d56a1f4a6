"""redis://HOST#key=NAME&value=RE2: the key exists and its value (first 64 KiB) matches.

The oracle is the shell loop people write: ``redis-cli --raw GET KEY | head -c 65536 | grep -qE
RE`` (with patterns whose meaning is the same in RE2 and POSIX EREs, and that match within a
line, as grep does).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.support.attempts import assert_first_attempt_as_runner, probe
from tests.support.command import ready_event, usage_error
from tests.support.fast import FAST
from tests.support.redisd import RedisServer, unavailable_reason
from tests.support.servers import server_factory
from tests.support.targets import refusals
from tests.support.waiting import meanwhile
from waitfor import WaitTimeout, wait_for

pytestmark = pytest.mark.skipif(
    unavailable_reason("redis-server", "redis-cli") is not None,
    reason=str(unavailable_reason("redis-server", "redis-cli")),
)

KIB64 = 64 * 1024  # the bound, not read from the code under test


@pytest.fixture
def running(tmp_path: Path) -> Iterator[RedisServer]:
    with server_factory(RedisServer, tmp_path) as make:
        server = make()
        server.start()
        yield server


def redis_cli_says(server: RedisServer, key: str, pattern: str) -> bool:
    base = ["redis-cli", "-h", "127.0.0.1", "-p", str(server.port), "--raw"]
    if server.cli("EXISTS", key) != "1":
        return False
    value = subprocess.run([*base, "GET", key], capture_output=True, timeout=30).stdout
    value = value.removesuffix(b"\n")[:KIB64]  # --raw adds a newline
    # one line per value, the empty one too (grep finds nothing in no lines at all)
    line = value + b"\n"
    found = subprocess.run(["grep", "-qE", pattern], input=line, timeout=30, check=False)
    assert found.returncode in (0, 1)
    return found.returncode == 0


def url(server: RedisServer, key: str, pattern: str) -> str:
    return (
        f"redis://127.0.0.1:{server.port}#key={quote(key, safe='')}&value={quote(pattern, safe='')}"
    )


VALUES = {
    "flag": "1",
    "status": "migrations: 41 applied, status=ready",
    "late": "x" * KIB64 + "READY",  # READY past the first 64 KiB
    "edge": "x" * (KIB64 - 5) + "READY",  # READY ends exactly at 64 KiB
    "empty": "",
}
PATTERNS = ["^1$", "READY", "status=(ready|green)", "[0-9]+ applied", "nothing", "^$"]


@pytest.mark.parametrize("key", sorted(VALUES))
def test_value_agrees_with_redis_cli(running: RedisServer, key: str) -> None:
    running.cli("SET", key, VALUES[key])
    for pattern in PATTERNS:
        outcome = probe(url(running, key, pattern))
        assert outcome.ready == redis_cli_says(running, key, pattern), (pattern, outcome)
    missing = probe(url(running, "absent", "."))
    assert not missing.ready
    assert not redis_cli_says(running, "absent", ".")


def test_the_reasons_never_quote_the_value(running: RedisServer) -> None:
    running.cli("SET", "token", "s3cr3t-token-value")
    outcome = probe(url(running, "token", "^ready$"))
    assert outcome.reason == "key 'token' exists, but its value does not match '^ready$'"
    assert "s3cr3t" not in outcome.reason
    assert probe(url(running, "token", "token")).reason == (
        "key 'token' exists, its value matches 'token'"
    )
    assert probe(url(running, "nope", "x")).reason == "key 'nope' does not exist yet"


def test_a_value_that_is_not_a_string(running: RedisServer) -> None:
    running.cli("RPUSH", "jobs", "a")
    outcome = probe(url(running, "jobs", "a"))
    assert outcome.reason == "key 'jobs' holds no string value (WRONGTYPE)"
    assert "WRONGTYPE" in running.cli("GET", "jobs")  # the oracle says as much


def test_waits_for_the_value_to_change(running: RedisServer) -> None:
    running.cli("SET", "migration", "running")
    target = url(running, "migration", "^done$")
    with pytest.raises(WaitTimeout):
        wait_for(target, timeout=0.5, backoff=FAST)
    with meanwhile(0.3, lambda: running.cli("SET", "migration", "done")):
        (result,) = wait_for(target, timeout=20, backoff=FAST)
    assert result.attempts > 1
    assert redis_cli_says(running, "migration", "^done$")


def test_with_role_and_database(running: RedisServer) -> None:
    running.cli("-n", "2", "SET", "phase", "seeded")
    base = f"redis://127.0.0.1:{running.port}"
    assert probe(f"{base}/2#key=phase&value=seed&role=master").reason == (
        "role master, key 'phase' exists, its value matches 'seed'"
    )
    assert not probe(f"{base}/0#key=phase&value=seed").ready  # another database


def test_the_first_attempt_agrees(running: RedisServer) -> None:
    running.cli("SET", "k", "ready")
    assert_first_attempt_as_runner(
        [url(running, "k", "^ready$")],
        [url(running, "k", "^no$"), url(running, "absent", ".")],
    )


test_bad_options_are_one_line_errors = refusals(
    [
        ("value=x", "value needs the key it is the value of: #key=NAME&value=RE2"),
        ("key=k&value=(a", "value regex '(a' is invalid"),
        ("key=k&value=(%3F=x)", "RE2 syntax"),
        ("key=k&value=a&value=b", "option 'value' given more than once"),
        ("key=k&value=" + "(a|b)" * 3000, "is too large"),
    ],
    address="redis://:hunter2@db#{}",
    regex=False,
    hidden=["hunter2"],
    one_line=True,
)


def test_the_cli_exit_2_and_json(running: RedisServer) -> None:
    assert "hunter2" not in usage_error("redis://:hunter2@db#value=x")
    running.cli("CONFIG", "SET", "requirepass", "pw-77")
    running.cli("SET", "ready", "yes", password="pw-77")
    target = f"redis://:pw-77@127.0.0.1:{running.port}#key=ready&value=yes"
    done = ready_event(target, hidden=["pw-77"])
    assert done["target"] == f"redis://:***@127.0.0.1:{running.port}#key=ready&value=yes"
    assert done["reason"] == "key 'ready' exists, its value matches 'yes'"
