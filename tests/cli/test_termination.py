"""The termination message (waitfor/cli/termination.py): what `kubectl describe pod` shows as the
init container's "Last State: Terminated ... Message", written by the real command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.servers import http_server
from waitfor.cli import command as cli
from waitfor.cli import termination

WAITFOR = [sys.executable, "-m", "waitfor"]


def waitfor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WAITFOR_")}
    return subprocess.run(
        [*WAITFOR, *args], capture_output=True, text=True, timeout=60, env={**clean, **env}
    )


def test_timeout_writes_one_line_per_target_not_ready(tmp_path: Path) -> None:
    log = tmp_path / "termination-log"
    closed = free_port()
    with http_server() as (url, _):
        done = waitfor("-t", "1", "--termination-log", str(log), f"tcp://127.0.0.1:{closed}", url)
    assert done.returncode == 124, done.stderr
    assert log.read_text().splitlines() == [
        "timed out after 1s",
        f"tcp://127.0.0.1:{closed}: 127.0.0.1:{closed} connection refused",
    ]


def test_the_environment_names_the_file_too(tmp_path: Path) -> None:
    log = tmp_path / "msg"
    done = waitfor("-t", "0.3", f"tcp://127.0.0.1:{free_port()}", WAITFOR_TERMINATION_LOG=str(log))
    assert done.returncode == 124
    assert log.read_text().startswith("timed out after 0.3s\ntcp://")


def test_a_bad_target_says_so(tmp_path: Path) -> None:
    log = tmp_path / "msg"
    done = waitfor("--termination-log", str(log), "tcp://db")
    assert done.returncode == 2
    assert log.read_text() == "invalid target 'tcp://db': missing port\n"
    assert done.stderr == f"waitfor: error: {log.read_text()}"


def test_a_bad_option_from_the_environment_still_writes(tmp_path: Path) -> None:
    log = tmp_path / "msg"
    done = waitfor("tcp://db:1", WAITFOR_TIMEOUT="soon", WAITFOR_TERMINATION_LOG=str(log))
    assert done.returncode == 2
    assert "WAITFOR_TIMEOUT" in log.read_text()


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_interrupted_while_waiting(tmp_path: Path, sig: signal.Signals, code: int) -> None:
    log = tmp_path / "msg"
    closed = free_port()
    proc = subprocess.Popen(
        [*WAITFOR, "-t", "60", "--termination-log", str(log), f"tcp://127.0.0.1:{closed}"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while proc.stderr is not None and "not ready" not in proc.stderr.readline():
            assert time.monotonic() < deadline
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
    finally:
        proc.kill()
        proc.communicate()
    assert log.read_text().splitlines() == [
        f"interrupted by {sig.name}",
        f"tcp://127.0.0.1:{closed}: 127.0.0.1:{closed} connection refused",
    ]


def test_success_writes_nothing(tmp_path: Path) -> None:
    existing = tmp_path / "termination-log"
    existing.write_text("")
    absent = tmp_path / "absent"
    with http_server() as (url, _):
        assert waitfor("--termination-log", str(existing), url).returncode == 0
        assert waitfor("--termination-log", str(absent), url).returncode == 0
    # ready at the second attempt, on the event loop: the same
    flag = tmp_path / "flag"
    later = f"exec:sh -c 'test -e {flag} || {{ touch {flag}; exit 1; }}'"
    done = waitfor("--termination-log", str(existing), later)
    assert done.returncode == 0, done.stderr
    assert "not ready" in done.stderr
    assert existing.read_text() == ""
    assert not absent.exists()


def test_no_secret(tmp_path: Path) -> None:
    log = tmp_path / "msg"
    port = free_port()
    done = waitfor(
        "-t",
        "0.5",
        "--termination-log",
        str(log),
        f"postgresql://app:Pg5ecret@127.0.0.1:{port}/db",
        f"http://u:Http5ecret@127.0.0.1:{port}/#header=X-Api-Key:%20Hdr5ecret",
    )
    assert done.returncode == 124
    text = log.read_text()
    assert len(text.splitlines()) == 3, text
    for secret in ("Pg5ecret", "Http5ecret", "Hdr5ecret"):
        assert secret not in text
    assert "***" in text


def test_at_most_4_kib_cut_at_a_line(tmp_path: Path) -> None:
    log = tmp_path / "msg"
    targets = [f"tcp://127.0.0.1:{free_port()}" for _ in range(3)]
    long = [f"file:///{'d' * 200}/{n}/{'é' * 100}" for n in range(40)]
    done = waitfor("-t", "0.5", "--termination-log", str(log), *targets, *long)
    assert done.returncode == 124
    data = log.read_bytes()
    assert 3500 < len(data) <= 4096
    lines = data.decode().splitlines()  # valid UTF-8, whole lines
    assert lines[0] == "timed out after 0.5s"
    assert lines[1].startswith(targets[0])
    assert lines[-1].startswith("... and ")
    assert lines[-1].endswith(" more")
    shown = len(lines) - 2
    assert int(lines[-1].split()[2]) == 43 - shown


def test_bounded_cuts_a_long_first_line_at_a_character() -> None:
    data = termination.bounded(["é" * 3000, "next"], limit=100)
    assert len(data) <= 100
    text = data.decode()  # not cut inside a character
    assert text.endswith("...\nnext\n")
    data = termination.bounded(["é" * 3000, "x" * 60, "y"], limit=100)
    assert len(data) <= 100
    assert data.decode().endswith("...\n... and 2 more\n")
    assert termination.bounded(["a", "b"]) == b"a\nb\n"
    assert termination.bounded(["line\nbreak\x1b[2J"]) == b"line break\x1b[2J\n"


@pytest.mark.parametrize("where", ["dir", "missing-dir", "fifo", "read-only", "proc", "full"])
def test_a_path_that_cannot_be_written_is_ignored(tmp_path: Path, where: str) -> None:
    path = tmp_path / "msg"
    if where == "proc":
        path = Path("/proc/version")  # not writable, even by root
    elif where == "full":
        path = Path("/dev/full")  # opens, but every write fails (ENOSPC)
    elif where == "dir":
        path.mkdir()
    elif where == "missing-dir":
        path = tmp_path / "nowhere" / "msg"
    elif where == "fifo":
        os.mkfifo(path)  # nobody reads it: opening must not hang the exit
    else:
        path.write_text("")
        path.chmod(0o444)
        if os.access(path, os.W_OK):  # root
            pytest.skip("root writes to read-only files")
    port = free_port()
    done = waitfor("-t", "0.3", "--termination-log", str(path), f"tcp://127.0.0.1:{port}")
    assert done.returncode == 124
    # waiting, (not ready: when a loaded machine let an attempt end), still not ready: nothing
    # about the file
    lines = done.stderr.splitlines()
    assert lines[0].startswith("waitfor: waiting for"), done.stderr
    assert " still not ready after " in lines[-1], done.stderr
    assert all(" not ready: " in line for line in lines[1:-1]), done.stderr
    assert len(lines) <= 3, done.stderr


def test_the_default_file_is_used_only_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    default = tmp_path / "termination-log"
    monkeypatch.setattr(termination, "DEFAULT_PATH", str(default))
    monkeypatch.delenv("WAITFOR_TERMINATION_LOG", raising=False)
    with pytest.raises(SystemExit) as info:
        cli.main(["-q", "-t", "0.2", f"tcp://127.0.0.1:{free_port()}"])
    assert info.value.code == 124
    assert not default.exists()  # not made: outside a container there is none
    default.write_text("old text, longer than the new message will be" * 200)
    with pytest.raises(SystemExit) as info:
        cli.main(["-q", "-t", "0.2", f"tcp://127.0.0.1:{free_port()}"])
    assert info.value.code == 124
    assert default.read_text().startswith("timed out after 0.2s\ntcp://127.0.0.1:")
    assert "old text" not in default.read_text()
