"""--any: done when any one target is ready; the others cancelled cleanly; 124 only if none was."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.command import waitfor as run_waitfor
from tests.support.ports import free_port
from tests.support.servers import http_server, scripted_peer, tcp_listener
from waitfor import api
from waitfor.errors import UsageError, WaitTimeout

waitfor = functools.partial(run_waitfor, timeout=60)


@contextmanager
def silent_peer() -> Iterator[tuple[int, threading.Event]]:
    """Accepts, says nothing, and notes when the client closes its connection."""
    closed = threading.Event()

    def hold(conn: socket.socket) -> None:
        conn.settimeout(30)
        while conn.recv(4096):
            pass
        closed.set()

    with scripted_peer(hold) as port:
        yield port, closed


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_live_target_among_dead_ones_of_other_kinds_ends_the_wait(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    marker = tmp_path / "ran"
    hanging = f"exec:sh -c 'echo $$ > {pidfile}; exec sleep 60'"
    dead = free_port()
    live = free_port()
    with silent_peer() as (silent, closed), tcp_listener(live, delay=1.0):
        started = time.monotonic()
        result = waitfor(
            "--any",
            "-o",
            "json",
            "--attempt-timeout",
            "30s",
            f"tcp://127.0.0.1:{dead}",
            f"postgresql://127.0.0.1:{dead}/db",
            f"redis://127.0.0.1:{silent}",
            hanging,
            f"tcp://127.0.0.1:{live}",
            "--",
            "sh",
            "-c",
            f"touch {marker}",
        )
        took = time.monotonic() - started
        assert closed.wait(5)  # the silent peer's connection was closed, not abandoned
    assert result.returncode == 0, result.stderr
    assert marker.exists()  # the command ran
    assert took < 20  # not the 30s attempt timeout of the hanging ones
    summary = [json.loads(line) for line in result.stderr.splitlines() if '"summary"' in line]
    ready = [s["target"] for s in summary if s["ready"]]
    assert ready == [f"tcp://127.0.0.1:{live}"]
    assert len(summary) == 5
    pid = int(pidfile.read_text())
    assert not alive(pid)  # the exec'd process group was killed


def test_none_ready_is_124_naming_each() -> None:
    dead = free_port()
    result = waitfor("--any", "-t", "1", f"tcp://127.0.0.1:{dead}", "exec:false")
    assert result.returncode == 124, result.stderr
    assert f"tcp://127.0.0.1:{dead} still not ready" in result.stderr
    assert "exec:false still not ready" in result.stderr
    assert "Traceback" not in result.stderr


def test_text_summary_names_the_one_that_was_ready() -> None:
    dead = free_port()
    with http_server() as (base, _):
        result = waitfor(
            "-o", "text", f"tcp://127.0.0.1:{dead}", f"{base}/", env={"WAITFOR_ANY": "true"}
        )
    assert result.returncode == 0, result.stderr
    assert f"{base}/ ready after" in result.stderr
    assert f"tcp://127.0.0.1:{dead} cancelled after" in result.stderr


def test_the_targets_cancelled_after_the_first_ready_one_say_so() -> None:
    """Not "still not ready after 0.00s": they were not given up on by the deadline."""
    dead = free_port()
    with silent_peer() as (silent, _), http_server() as (base, _):
        result = waitfor(
            "--any", "-o", "text", f"tcp://127.0.0.1:{dead}", f"redis://127.0.0.1:{silent}", base
        )
    assert result.returncode == 0, result.stderr
    assert "still not ready" not in result.stderr
    summary = result.stderr.splitlines()[-3:]
    assert summary[2].startswith(f"waitfor: {base} ready after"), summary
    cancelled = [f"tcp://127.0.0.1:{dead}", f"redis://127.0.0.1:{silent}"]
    for line, target in zip(summary[:2], cancelled, strict=True):
        assert line.startswith(f"waitfor: {target} cancelled after "), summary
        assert "another target was ready first" in line, summary


def test_library_any_ready_returns_every_result_and_closes_connections() -> None:
    dead = free_port()
    with silent_peer() as (silent, closed):
        live = free_port()
        with tcp_listener(live, delay=0.5):
            results = asyncio.run(
                api.wait_for_async(
                    f"tcp://127.0.0.1:{dead}",
                    f"redis://127.0.0.1:{silent}",
                    f"tcp://127.0.0.1:{live}",
                    any_ready=True,
                    timeout=20,
                    attempt_timeout=30,
                )
            )
            assert closed.wait(5)
    assert [r.ready for r in results] == [False, False, True]


def test_library_any_ready_times_out_only_when_none_was() -> None:
    dead = free_port()
    with pytest.raises(WaitTimeout) as info:
        api.wait_for(f"tcp://127.0.0.1:{dead}", "exec:false", any_ready=True, timeout=0.5)
    assert [r.ready for r in info.value.results] == [False, False]
    with pytest.raises(WaitTimeout):  # one attempt each (timeout=0): none was ready
        api.wait_for(f"tcp://127.0.0.1:{dead}", "exec:false", any_ready=True, timeout=0)
    results = api.wait_for(f"tcp://127.0.0.1:{dead}", "exec:true", any_ready=True, timeout=0)
    assert [r.ready for r in results] == [False, True]


def test_any_with_stable_waits_for_one_to_stay_ready() -> None:
    dead = free_port()
    started = time.monotonic()
    results = api.wait_for(
        f"tcp://127.0.0.1:{dead}", "exec:true", any_ready=True, stable="0.5s", timeout=20
    )
    assert time.monotonic() - started >= 0.5
    assert [r.ready for r in results] == [False, True]


def test_bad_any_values() -> None:
    with pytest.raises(UsageError):
        api.Wait("tcp://a:1", any_ready="yes")  # type: ignore[arg-type]
    result = waitfor("tcp://a:1", env={"WAITFOR_ANY": "maybe"})
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "WAITFOR_ANY" in result.stderr
