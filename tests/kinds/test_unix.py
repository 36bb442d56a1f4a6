"""Unix sockets: real listeners, stale socket files, missing paths."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.fast import FAST
from tests.support.servers import full_backlog
from tests.support.targets import refusals
from tests.support.waiting import reason
from waitfor import wait_for
from waitfor.base.deadline import Deadline
from waitfor.core.targets import parse_target
from waitfor.kind import Outcome
from waitfor.kinds.unix import UnixCheck


@contextmanager
def unix_listener(path: Path) -> Iterator[None]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))
        sock.listen(8)
        yield
    path.unlink(missing_ok=True)


def test_a_listening_socket_is_ready(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    with unix_listener(path):
        results = wait_for(f"unix://{path}", timeout=5)
    assert results[0].reason == f"connected to {path}"


def test_the_first_attempt_without_an_event_loop(tmp_path: Path) -> None:
    """probe_now (the cold-start path) gives probe's outcome when ready, else leaves it (None)."""
    path = tmp_path / "app.sock"
    check = UnixCheck(parse_target(f"unix://{path}"))
    assert check.probe_now(Deadline.after(1.0)) is None  # missing: the runner's attempt says why
    with unix_listener(path):
        assert check.probe_now(Deadline.after(1.0)) == asyncio.run(check.probe(Deadline.after(1.0)))
        assert check.probe_now(Deadline.after(1.0)) == Outcome.up(f"connected to {path}")


def test_a_missing_socket_is_no_such_file(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    assert reason(f"unix://{path}") == f"{path}: no such file or directory"


def test_a_stale_socket_file_is_connection_refused(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(str(path))  # and never listens: what a crashed server leaves behind
    assert path.is_socket()
    assert reason(f"unix://{path}") == (
        f"{path}: connection refused (a socket file with nothing listening)"
    )


def test_a_regular_file_is_not_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    path.write_text("x")
    assert reason(f"unix://{path}") == f"{path}: not a socket"


def test_waits_for_the_listener(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    ready = threading.Event()
    done = threading.Event()

    def serve() -> None:
        with unix_listener(path):
            ready.set()
            done.wait(10)

    timer = threading.Timer(0.3, serve)
    timer.start()
    try:
        results = wait_for(f"unix://{path}", timeout=10, backoff=FAST)
    finally:
        done.set()
        timer.join()
    assert ready.is_set()
    assert results[0].attempts > 1


def test_a_full_backlog_is_not_ready(tmp_path: Path) -> None:
    path = tmp_path / "app.sock"
    with full_backlog(path):
        assert reason(f"unix://{path}") == f"{path}: listening, but its backlog is full"


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("unix:///run/app.sock", "/run/app.sock"),
        ("unix://localhost/run/app.sock", "/run/app.sock"),
        ("unix:/run/app.sock", "/run/app.sock"),
        ("unix:///run/my%20app.sock", "/run/my app.sock"),
    ],
)
def test_addresses(text: str, path: str) -> None:
    target = parse_target(text)
    assert target.host == path
    assert str(target) == f"unix://{path}"


test_bad_targets = refusals(
    [
        ("unix://db/run/app.sock", "local path"),
        ("unix://", "absolute"),
        ("unix:relative.sock", "absolute"),
        ("unix:///" + "x" * 200, "longer than 107 bytes"),
        ("unix:///run/app.sock#nonempty", "unknown option"),
    ]
)


def test_path_is_not_followed_into_a_directory(tmp_path: Path) -> None:
    os.mkdir(tmp_path / "dir.sock")
    assert reason(f"unix://{tmp_path}/dir.sock") == f"{tmp_path}/dir.sock: not a socket"
