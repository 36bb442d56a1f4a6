"""The command starts clean; broken stdio and scarce descriptors never stop the wait or the command.

The oracle for "starts clean" is a shell exec'ing the same command in the same environment.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.servers import tcp_listener

WAITFOR = (sys.executable, "-m", "waitfor")
SIGNAL_STATE = 'exec grep -E "^Sig(Ign|Blk|Cgt)" /proc/self/status'


@pytest.fixture
def ready() -> Iterator[str]:
    port = free_port()
    with tcp_listener(port):
        yield f"tcp://127.0.0.1:{port}"


@pytest.mark.parametrize("inherited", ["", 'trap "" INT QUIT; '], ids=["defaults", "INT ignored"])
def test_the_command_starts_with_the_signal_state_a_shell_gives(ready: str, inherited: str) -> None:
    """Also what waitfor inherited: a background job's ignored SIGINT stays ignored."""
    shell = subprocess.run(
        ["sh", "-c", inherited + SIGNAL_STATE], capture_output=True, text=True, check=True
    )
    command = ("sh", "-c", SIGNAL_STATE)
    ours = subprocess.run(
        ["sh", "-c", f'{inherited}exec "$@"', "sh", *WAITFOR, "-q", ready, "--", *command],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "SigIgn" in shell.stdout
    assert ours.stdout == shell.stdout  # SIGPIPE, SIGXFSZ not ignored; nothing blocked


def test_a_pipeline_in_the_command_ends_quietly(ready: str) -> None:
    result = subprocess.run(
        [*WAITFOR, "-q", ready, "--", "sh", "-c", "yes | head -1"], capture_output=True, text=True
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "y\n", "")


def test_an_empty_command_is_a_usage_error(ready: str) -> None:
    result = subprocess.run([*WAITFOR, ready, "--", ""], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr == "waitfor: error: the command after -- is empty\n"


def test_closed_stderr_still_runs_the_command_as_a_shell_would(ready: str, tmp_path: Path) -> None:
    report = tmp_path / "report"
    probe = f'if [ -e /proc/$$/fd/2 ]; then echo open; else echo closed; fi > "{report}"; exit 3'
    shell = subprocess.run(["sh", "-c", 'exec 2>&-; exec sh -c "$0"', probe])
    expected = (shell.returncode, report.read_text())
    assert expected == (3, "closed\n")
    report.unlink()
    waited = subprocess.run(
        ["sh", "-c", 'exec 2>&-; exec "$@"', "sh", *WAITFOR, ready, "--", "sh", "-c", probe]
    )
    assert (waited.returncode, report.read_text()) == expected


def test_closed_stderr_still_times_out_with_124() -> None:
    target = f"tcp://127.0.0.1:{free_port()}"
    result = subprocess.run(
        ["sh", "-c", 'exec 2>&-; exec "$@"', "sh", *WAITFOR, "-t", "0.3", target]
    )
    assert result.returncode == 124


@pytest.mark.parametrize("output", ["text", "json", "tty"])
def test_stderr_whose_reader_is_gone(ready: str, tmp_path: Path, output: str) -> None:
    """`waitfor ... 2>&1 | head -1` once head has exited: every progress line is EPIPE."""
    report = tmp_path / "ran"
    read, write = os.pipe()
    os.close(read)
    try:
        waited = subprocess.run(
            [*WAITFOR, "-o", output, ready, "--", "sh", "-c", f'echo ran > "{report}"; exit 3'],
            stderr=write,
        )
    finally:
        os.close(write)
    assert waited.returncode == 3
    assert report.read_text() == "ran\n"


def test_stderr_whose_reader_is_gone_still_times_out_with_124() -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        target = f"tcp://127.0.0.1:{free_port()}"
        result = subprocess.run([*WAITFOR, "-t", "0.3", target], stderr=write)
    finally:
        os.close(write)
    assert result.returncode == 124


def test_far_fewer_descriptors_than_targets_is_not_ready_not_a_crash() -> None:
    """40 HTTP targets on a server that accepts and never answers, with ulimit -n 24:
    the sockets held by some attempts leave none for the others."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(128)  # never accepted: the kernel completes the handshakes
        base = f"http://127.0.0.1:{server.getsockname()[1]}"
        targets = [f"{base}/{n}" for n in range(40)]
        result = subprocess.run(
            [
                "sh",
                "-c",
                'ulimit -n 24 && exec "$@"',
                "sh",
                *WAITFOR,
                "-o",
                "json",
                "-t",
                "1.5",
                *targets,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 124, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    records = [json.loads(line) for line in result.stderr.splitlines()]
    reasons = {r["reason"] for r in records if r["event"] == "not_ready"}
    assert any(reason.endswith("too many open files") for reason in reasons), reasons
    # and on time: forty targets once paid ~90 ms each of blocking TLS set-up past the deadline
    assert max(r["elapsed"] for r in records if r["event"] == "summary") < 1.5 + 0.5


def test_no_descriptor_for_the_event_loop_is_one_clear_line() -> None:
    result = subprocess.run(
        ["sh", "-c", 'ulimit -n 5 && exec "$@"', "sh", *WAITFOR, "tcp://127.0.0.1:1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    # The first attempt needs no event loop, so "waiting for" may come first; then one line.
    assert result.stderr.splitlines()[-1:] == [
        "waitfor: error: too many open files: raise the limit (ulimit -n) or wait for fewer targets"
    ]
    assert result.stderr.splitlines()[:-1] in (
        [],
        ["waitfor: waiting for tcp://127.0.0.1:1 (timeout 60s)"],
    )
