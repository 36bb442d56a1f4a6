"""exec: real processes; an attempt that runs too long is killed with its whole process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.command import waitfor
from tests.support.fast import FAST
from tests.support.targets import refusals
from tests.support.waiting import reason
from waitfor import WaitTimeout, wait_for
from waitfor.core.targets import parse_target


def alive(pid: int) -> bool:
    """Running, or a zombie nobody has reaped yet (still a process that survived)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def assert_all_gone(pids: list[int]) -> None:
    give_up = time.monotonic() + 10
    while any(alive(pid) for pid in pids) and time.monotonic() < give_up:
        time.sleep(0.05)  # the orphans' new parent reaps them
    assert not [pid for pid in pids if alive(pid)]


def test_exit_0_is_ready_with_the_last_line() -> None:
    results = wait_for("exec:sh -c 'echo starting; echo all good'", timeout=5)
    assert results[0].reason == "exit 0: all good"


def test_a_failing_command_reports_its_code_and_last_line_of_either_stream() -> None:
    assert reason("exec:sh -c 'echo out; echo \"db: connection refused\" >&2; exit 3'") == (
        "exit 3: db: connection refused"
    )


def test_no_shell_runs_the_words() -> None:
    results = wait_for("exec:echo $HOME '*' \"a  b\"", timeout=5)
    assert results[0].reason == "exit 0: $HOME * a  b"


def test_the_command_becomes_ready_later(tmp_path: Path) -> None:
    flag = tmp_path / "ready"
    with subprocess.Popen(["sh", "-c", f"sleep 0.4; touch {flag}"]):
        results = wait_for(f"exec:test -e {flag}", timeout=10, backoff=FAST)
    assert results[0].ready
    assert results[0].attempts > 1


def test_a_missing_command_is_not_ready() -> None:
    assert reason("exec:no-such-command-4711 --flag") == "command not found: no-such-command-4711"


def test_a_command_killed_by_a_signal_is_named() -> None:
    assert reason("exec:sh -c 'kill -TERM $$'") == "killed by SIGTERM"


def test_a_command_killed_by_a_real_time_signal_is_named() -> None:
    # Real-time signals have no name of their own in signal.Signals.
    offset = 40 - signal.SIGRTMIN
    assert reason("exec:sh -c 'kill -40 $$'") == f"killed by signal 40 (SIGRTMIN+{offset})"
    assert reason(f"exec:sh -c 'kill -{int(signal.SIGRTMAX)} $$'") == "killed by SIGRTMAX"


def test_a_hanging_attempt_is_killed_with_its_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # The shell, a background child and a grandchild: all in the attempt's process group.
    command = f"sh -c 'echo $$ >> {pids}; (sleep 300 & echo $! >> {pids}; wait) & sleep 300'"
    text = reason(f"exec:{command}", timeout=3, attempt_timeout=0.5)
    assert text.startswith("still running after 0.")
    assert text.endswith("s, killed")
    recorded = [int(line) for line in pids.read_text().split()]
    assert len(recorded) >= 4  # at least two attempts, two processes each
    assert_all_gone(recorded)


def test_cancelled_at_any_moment_the_group_is_killed_and_the_wait_ends(tmp_path: Path) -> None:
    # Deadlines of a few milliseconds land while the command is being started, while it runs
    # and while it is being killed; none may hang the wait or leave a process behind.
    pids = tmp_path / "pids"
    target = f"exec:sh -c 'echo $$ >> {pids}; sleep 300 & echo $! >> {pids}; wait'"
    for step in range(40):
        started = time.monotonic()
        with pytest.raises(WaitTimeout):
            wait_for(target, timeout=0.001 + step * 0.001, attempt_timeout=0.01, backoff=FAST)
        assert time.monotonic() - started < 5
    assert_all_gone([int(line) for line in pids.read_text().split()] if pids.exists() else [])


def test_what_an_exited_command_left_running_is_stopped(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    results = wait_for(f"exec:sh -c 'sleep 300 & echo $! > {pids}; echo done'", timeout=5)
    assert results[0].reason == "exit 0: done"
    assert_all_gone([int(pids.read_text())])


def test_sigterm_to_waitfor_kills_the_running_attempt(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    waiter = subprocess.Popen(
        [sys.executable, "-m", "waitfor", "-t", "60", f"exec:sh -c 'echo $$ > {pids}; sleep 300'"],
        stderr=subprocess.DEVNULL,
    )
    try:
        give_up = time.monotonic() + 20
        while not (pids.exists() and pids.read_text().strip()) and time.monotonic() < give_up:
            time.sleep(0.05)
        waiter.send_signal(signal.SIGTERM)
        assert waiter.wait(20) == 143
    finally:
        waiter.kill()
        waiter.wait()
    assert_all_gone([int(pids.read_text())])


def test_the_deadline_holds_for_a_hanging_command(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = waitfor("-t", "1", f"exec:sh -c 'echo $$ > {pids}; sleep 300'", timeout=60)
    assert result.returncode == 124
    assert time.monotonic() - started < 10  # the interpreter's start-up, on a busy machine
    assert "still running after" in result.stderr.splitlines()[-1]
    assert_all_gone([int(pids.read_text())])


def test_namespace_placeholder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "prod")
    results = wait_for("exec:test {namespace} = prod", timeout=5)
    assert results[0].ready
    assert str(results[0].target) == "exec:test prod = prod"


def test_waitfor_targets_keeps_quoted_words_together(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "waitfor", "-t", "10", "--", "true"],
        env={
            **os.environ,
            "POD_NAMESPACE": "prod",
            "WAITFOR_TARGETS": f"file://{tmp_path} 'exec:test {{namespace}} = prod'",
        },
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert "exec:test prod = prod is ready: exit 0" in result.stderr


def test_long_and_hostile_output_is_one_short_line() -> None:
    text = reason(
        'exec:sh -c \'printf "\\033[31mred\\a\\n"; head -c 5000 /dev/zero | tr "\\0" x; exit 1\''
    )
    assert text.startswith("exit 1: xxx")
    assert len(text) < 220
    assert "\033" not in reason("exec:sh -c 'printf \"\\033[31mred\\n\"; exit 1'")


@pytest.mark.parametrize(
    ("text", "display", "secret"),
    [
        ("exec:mysql --password=hunter2 -h db", "exec:mysql --password=*** -h db", "hunter2"),
        ("exec:cli --token s3cr3t ping", "exec:cli --token *** ping", "s3cr3t"),
        (
            "exec:env PGPASSWORD=pw1 psql -c 'select 1'",
            "exec:env PGPASSWORD=*** psql -c 'select 1'",
            "pw1",
        ),
        ("exec:psql postgresql://u:pw2@db/app", "exec:psql postgresql://u:***@db/app", "pw2"),
        # the short options clients take credentials with, from the split words
        ("exec:mysql -h db -upw -pS3c app", "exec:mysql -h db -upw -p*** app", "S3c"),
        (
            "exec:redis-cli -h db -p 6379 -a S3c ping",
            "exec:redis-cli -h db -p 6379 -a *** ping",
            "S3c",
        ),
        ("exec:mongosh -u app -p 123456", "exec:mongosh -u app -p ***", "123456"),
        ("exec:sshpass -p S3c ssh -p 22 h", "exec:sshpass -p *** ssh -p 22 h", "S3c"),
        ("exec:mysql -psecretpw -e quit", "exec:mysql -p*** -e quit", "secretpw"),
        ("exec:mysql -ptokenX1 db", "exec:mysql -p*** db", "tokenX1"),
        ("exec:tool -password S3c", "exec:tool -password ***", "S3c"),
        ("exec:curl -uadmin:hunter2 http://h", "exec:curl -uadmin:*** http://h", "hunter2"),
        ("exec:curl -uadmin:SECRETpw http://h", "exec:curl -uadmin:*** http://h", "SECRETpw"),
        (
            "exec:curl -HAuthorization:tok1 http://h",
            "exec:curl '-HAuthorization: ***' http://h",
            "tok1",
        ),
        ("exec:curl https://h/?token=abcS3C&x=1", "exec:curl 'https://h/?token=***&x=1'", "abcS3C"),
        ("exec:curl -u app:S3c http://x", "exec:curl -u app:*** http://x", "S3c"),
        ("exec:curl --user=app:S3c http://x", "exec:curl --user=app:*** http://x", "S3c"),
        ("exec:curl --user app:S3c http://x", "exec:curl --user app:*** http://x", "S3c"),
        (
            "exec:curl -H 'Authorization: Bearer S3c' http://x",
            "exec:curl -H 'Authorization: ***' http://x",
            "Bearer S3c",
        ),
        ("exec:curl --header 'X-Api-Key: S3c' x", "exec:curl --header 'X-Api-Key: ***' x", "S3c"),
        ("exec:curl '--header=X-Api-Key: S3c' x", "exec:curl '--header=X-Api-Key: ***' x", "S3c"),
        ("exec:cli --api-key S3c", "exec:cli --api-key ***", "S3c"),
        ("exec:psql mysql://u:p／S3c@db/app", "exec:psql mysql://***@db/app", "u:p／S3c"),  # noqa: RUF001
    ],
)
def test_secret_looking_words_are_hidden(text: str, display: str, secret: str) -> None:
    target = parse_target(text)
    assert str(target) == display
    assert secret in target.secrets


test_bad_targets = refusals(
    [
        ("exec:", "missing command"),
        ("exec:  ", "missing command"),
        ("exec:sh -c 'x", "no closing quotation"),
    ]
)


def test_an_unclosed_quote_in_waitfor_targets_is_a_usage_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "waitfor", "-t", "1"],
        env={**os.environ, "WAITFOR_TARGETS": "tcp://db:5432 'exec:pg_isready -h db"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert result.stderr == "waitfor: error: WAITFOR_TARGETS has an unclosed quote\n"


@pytest.mark.parametrize(
    ("text", "display"),
    [
        ("exec:mysql -uroot -p db", "exec:mysql -uroot -p db"),  # -p alone asks; db is a name
        ("exec:env A=1 /usr/bin/mysqladmin -p ping", "exec:env A=1 /usr/bin/mysqladmin -p ping"),
        ("exec:redis-cli -p6379 ping", "exec:redis-cli -p6379 ping"),
        ("exec:pg_isready -h db -p 5432 -U app", "exec:pg_isready -h db -p 5432 -U app"),
    ],
)
def test_names_and_ports_after_short_options_are_shown(text: str, display: str) -> None:
    target = parse_target(text)
    assert str(target) == display
    assert not target.secrets


def test_a_secret_the_command_prints_is_hidden_in_its_reason() -> None:
    text = reason("exec:sh -c 'echo \"auth $2 failed\" >&2; exit 1' sh -a S3cr3tPW")
    assert text == "exit 1: auth *** failed"
