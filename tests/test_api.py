from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.command import waitfor
from tests.support.imports import run_listing_imports
from tests.support.ports import free_port
from tests.support.servers import tcp_listener
from waitfor import (
    Target,
    TargetError,
    UsageError,
    WaitTimeout,
    api,
    parse_target,
    wait_for,
    wait_for_async,
)
from waitfor.base.backoff import MIN_DELAY, Backoff
from waitfor.cli.report import Reporter


def test_sync_and_async_forms() -> None:
    port = free_port()
    with tcp_listener(port):
        target = parse_target(f"tcp://127.0.0.1:{port}")
        assert wait_for(target, f"tcp://127.0.0.1:{port}", timeout="5s")[0].ready
        results = asyncio.run(wait_for_async(f"tcp://127.0.0.1:{port}", timeout=5))
        assert results[0].ready


def test_sync_form_refuses_to_block_a_running_loop() -> None:
    async def inside() -> None:
        with pytest.raises(UsageError, match="use 'await wait_for_async"):
            wait_for("tcp://127.0.0.1:1")

    asyncio.run(inside())


def test_timeout_exception_carries_reasons() -> None:
    port = free_port()
    with pytest.raises(WaitTimeout) as info:
        wait_for(f"tcp://127.0.0.1:{port}", timeout=0.3)
    error = info.value
    assert error.exit_code == 124
    assert [r.reason for r in error.results] == [f"127.0.0.1:{port} connection refused"]
    assert f"tcp://127.0.0.1:{port}: 127.0.0.1:{port} connection refused" in str(error)


def test_no_timeout_waits_forever() -> None:
    port = free_port()
    begun: list[float | None] = []

    class Recorder(Reporter):
        def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
            begun.append(timeout)

    # Nothing listens for the first attempts: a deadline of 0 would end the wait at once.
    with tcp_listener(port, delay=0.3):
        results = wait_for(
            f"tcp://127.0.0.1:{port}", timeout=None, reporter=Recorder(io.StringIO())
        )
        assert results[0].ready
        assert results[0].attempts > 1
    assert begun == [None]


@pytest.mark.parametrize("timeout", [0, 0.0, "0", "0s"])
def test_zero_timeout_is_one_attempt_per_target(timeout: float | str) -> None:
    """timeout=0 asks "is it ready now?": one attempt each, then the answer, never a wait."""
    up, down = free_port(), free_port()
    with tcp_listener(up):
        [result] = wait_for(f"tcp://127.0.0.1:{up}", timeout=timeout)
        assert result.ready
        assert result.attempts == 1
        with pytest.raises(WaitTimeout) as info:
            wait_for(f"tcp://127.0.0.1:{up}", f"tcp://127.0.0.1:{down}", timeout=timeout)
    ready, refused = info.value.results
    assert ready.ready
    assert (refused.ready, refused.attempts) == (False, 1)
    assert refused.reason == f"127.0.0.1:{down} connection refused"
    assert str(info.value).startswith("not ready at the first attempt: ")


def test_library_errors_are_what_python_code_expects() -> None:
    """A timeout is a TimeoutError; a check that cannot succeed is not bad input."""
    from waitfor import CheckFailed

    assert issubclass(WaitTimeout, TimeoutError)
    assert not issubclass(CheckFailed, UsageError)
    assert CheckFailed.exit_code == 2
    with pytest.raises(TimeoutError):
        wait_for(f"tcp://127.0.0.1:{free_port()}", timeout=0.2)


def test_defaults_refuse_an_option_no_kind_takes() -> None:
    with pytest.raises(UsageError, match="no kind takes an option 'insecur'"):
        wait_for("tcp://127.0.0.1:1", defaults={"insecur": True})
    # one that some kind takes is fine even when these targets do not use it (as the CLI's)
    port = free_port()
    with tcp_listener(port):
        assert wait_for(f"tcp://127.0.0.1:{port}", defaults={"cacert": "/none"})[0].ready


def test_events_go_to_the_waitfor_logger(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    caplog.set_level("DEBUG", logger="waitfor")
    with tcp_listener(port, delay=0.3):
        wait_for(f"tcp://127.0.0.1:{port}", timeout=10)
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "waitfor"]
    target = f"tcp://127.0.0.1:{port}"
    assert ("INFO", f"{target} not ready: 127.0.0.1:{port} connection refused") in records
    assert records[-1][0] == "INFO"
    assert records[-1][1].startswith(f"{target} ready: connected to 127.0.0.1:{port}")
    assert ("DEBUG", f"{target} attempt") in records
    caplog.clear()
    with pytest.raises(WaitTimeout):
        wait_for(f"tcp://127.0.0.1:{free_port()}", timeout=0.2)
    assert [r.levelname for r in caplog.records if "timed out" in r.getMessage()] == ["WARNING"]


def test_the_library_is_silent_without_logging_configured() -> None:
    """No "lastResort" lines on stderr: an app that did not configure logging sees nothing."""
    code = (
        "import logging, waitfor\n"
        "try:\n"
        "    waitfor.wait_for('tcp://127.0.0.1:1', timeout=0.2)\n"
        "except waitfor.WaitTimeout:\n"
        "    print('timed out')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout == "timed out\n"
    assert result.stderr == ""


def test_secrets_stay_out_of_exception_text() -> None:
    port = free_port()
    with pytest.raises(WaitTimeout) as info:
        wait_for(f"http://admin:hunter2@127.0.0.1:{port}/?api_key=k3y", timeout=0.3)
    for text in (str(info.value), repr(info.value), repr(info.value.results)):
        assert "hunter2" not in text
        assert "k3y" not in text
        assert f"127.0.0.1:{port}" in text


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"timeout": -1}, "timeout must be a positive"),
        ({"timeout": "later"}, "timeout: 'later' is not a duration"),
        ({"attempt_timeout": 0}, "attempt_timeout must be a positive"),
        ({"timeout": float("nan")}, "timeout must be a positive"),
        ({"timeout": 10**400}, r"timeout is too long \(at most 604800s"),
        ({"timeout": 1e300}, r"timeout is too long \(at most 604800s"),
        ({"attempt_timeout": float("inf")}, "attempt_timeout is too long"),
        ({"defaults": {"insecure": 1}}, "defaults: option 'insecure' must be a string, not int"),
        ({"defaults": ["insecure"]}, "defaults must be a mapping of option names, not list"),
        ({"backoff": "fast"}, "backoff must be a waitfor.Backoff, not str"),
        ({"backoff": Backoff(initial=0, maximum=0)}, "must be at least"),
        ({"backoff": Backoff(initial=0, maximum=1)}, "must be at least"),
        ({"invert": "yes"}, "invert must be True or False, not str"),
        ({"on_event": "print"}, "on_event must be callable, not str"),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], error: str) -> None:
    with pytest.raises(UsageError, match=error):
        wait_for("tcp://127.0.0.1:1", **kwargs)  # type: ignore[arg-type]


def test_a_boolean_default_reads_as_the_cli_gives_it() -> None:
    # the CLI's --insecure is defaults={"insecure": "true"}; True is what a caller writes
    target_true = api.Wait("https://127.0.0.1:1/", defaults={"insecure": True}).targets[0]
    target_text = api.Wait("https://127.0.0.1:1/", defaults={"insecure": "true"}).targets[0]
    assert target_true.options == target_text.options


def test_the_floor_between_attempts_holds_for_the_library() -> None:
    attempts: list[int] = []
    with pytest.raises(WaitTimeout):
        wait_for(
            "tcp://127.0.0.1:1",
            timeout=0.5,
            backoff=Backoff(initial=MIN_DELAY, maximum=MIN_DELAY, jitter=0),
            on_event=lambda event: attempts.append(event.attempt),
        )
    assert max(attempts) <= 0.5 / MIN_DELAY + 2  # not thousands


def test_bad_targets() -> None:
    with pytest.raises(UsageError, match="no targets"):
        wait_for()
    with pytest.raises(TargetError, match="missing port"):
        wait_for("tcp://db")


def test_cold_tcp_run_imports_no_protocol_library(tmp_path: Path) -> None:
    """An init container's cold start is paid on every pod start: tcp must not load httpx & co."""
    port = free_port()
    with tcp_listener(port):
        result, imported = run_listing_imports(tmp_path, f"tcp://127.0.0.1:{port}")
    assert result.returncode == 0, result.stderr
    assert "waitfor.kinds.tcp" in imported
    assert not imported & {"httpx", "dns", "dns.resolver", "psycopg", "waitfor.kinds.http.check"}


def test_zero_timeout_makes_exactly_one_attempt_per_target() -> None:
    """Not the quick first attempt and then the runner's: one probe each, ready or not."""
    port = free_port()
    events: list[str] = []
    with tcp_listener(port), pytest.raises(WaitTimeout) as info:
        wait_for(
            f"tcp://127.0.0.1:{port}",
            f"tcp://127.0.0.1:{free_port()}",
            timeout=0,
            on_event=lambda event: events.append(event.type.name),
        )
    assert events.count("ATTEMPT") == 2
    assert [r.attempts for r in info.value.results] == [1, 1]


def test_zero_timeout_and_a_stable_window_cannot_both_hold() -> None:
    with pytest.raises(UsageError, match="no stable window can pass"):
        wait_for("tcp://127.0.0.1:1", timeout=0, stable=0.3)


def test_logging_at_info_stays_quiet_while_an_http_target_is_down() -> None:
    """docs/library.md's ``logging.basicConfig(level=logging.INFO)``: a down http target (a real
    server answering 503) logs a few waitfor lines, not one per attempt, and none of httpx's
    per-request lines for waitfor's own requests; the application's own httpx requests
    still log as the application configured them."""
    from tests.support.servers import Script, http_server

    with http_server(Script(status=503, body=b"down")) as (url, script):
        program = (
            "import logging, sys, httpx, waitfor\n"
            "logging.basicConfig(level=logging.INFO, stream=sys.stdout)\n"
            f"try:\n    waitfor.wait_for({url + '/healthz'!r}, timeout=4,"
            " backoff=waitfor.Backoff(initial=0.02, maximum=0.05))\n"
            "except waitfor.WaitTimeout:\n    print('timed out')\n"
            f"httpx.get({url + '/app'!r})\n"  # the application's own request, after the wait
        )
        result = subprocess.run(
            [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
        )
    lines = result.stdout.splitlines()
    attempts = sum(path == "/healthz" for _, path, _ in script.requests)
    assert result.returncode == 0, result.stderr
    assert attempts >= 20, lines  # a line per attempt would show
    assert [line for line in lines if "/healthz" in line and "httpx" in line] == []
    assert len([line for line in lines if ":waitfor:" in line]) <= 5, lines
    assert any(":httpx:" in line and "/app" in line for line in lines), lines
    assert "timed out" in lines, lines


def test_the_deadline_counts_from_the_start_the_event_loops_start_included() -> None:
    """The quick first attempt runs before the event loop; starting the loop (importing
    asyncio) is part of the wait, so a timed-out run's elapsed time is the wall time since
    its begin event (it was the loop's start: tens of ms later, more under load)."""
    refused = f"tcp://127.0.0.1:{free_port()}"  # reserved, nobody listens
    for _ in range(3):
        done = waitfor("-t", "0.5", "-o", "json", refused)
        assert done.returncode == 124, done.stderr
        events = {e["event"]: e for e in map(json.loads, done.stderr.splitlines())}
        begin, end = (events[name] for name in ("begin", "timed_out"))
        wall = (
            datetime.fromisoformat(end["time"]) - datetime.fromisoformat(begin["time"])
        ).total_seconds()
        # Stamps to the millisecond; elapsed is taken as the timed_out event is made, and the
        # begin event is stamped a little after the start (so wall may be the shorter).
        assert wall - end["elapsed"] < 0.012, (wall, done.stderr)
