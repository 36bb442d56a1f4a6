"""--interval (fixed spacing, no backoff) and --delay (the first attempt later, the deadline
from the start), through the command's JSON events and the library's, against real listeners."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from tests.support.ports import free_port
from tests.support.servers import http_server
from waitfor import Backoff, Event, EventType, UsageError, WaitTimeout, wait_for


def waitfor_cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("WAITFOR_")}
    return subprocess.run(
        [sys.executable, "-m", "waitfor", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def json_events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines()]


def attempt_times(target: str, **keywords: Any) -> list[float]:
    """When each attempt began (seconds after the start), from the library's events."""
    began: list[float] = []

    def seen(event: Event) -> None:
        if event.type is EventType.ATTEMPT:
            began.append(event.elapsed)

    with pytest.raises(WaitTimeout):
        wait_for(target, on_event=seen, **keywords)
    return began


def test_interval_spaces_attempts_evenly_without_backoff() -> None:
    """A server that answers 503: every gap is the interval (never less), the count follows."""
    with http_server() as (url, script):
        script.status = 503
        began = attempt_times(f"{url}/", timeout=2.0, interval=0.4)
        requests = len(script.requests)
    gaps = [b - a for a, b in itertools.pairwise(began)]
    assert gaps
    assert all(0.39 <= gap < 2.0 for gap in gaps), gaps
    # the quick first attempt's request (a 503: asked again through httpx) may be one more
    assert 2 <= len(began) <= 6
    assert requests in (len(began), len(began) + 1)
    # the default backoff's first gaps are far shorter (50 ms, 100 ms): this is not it
    backoff = attempt_times(f"tcp://127.0.0.1:{free_port()}", timeout=0.5)
    assert backoff[1] - backoff[0] < 0.35


def test_interval_on_the_command_line_in_json_events() -> None:
    closed = free_port()
    done = waitfor_cli("-o", "json", "--interval", "0.7", "-t", "2.2", f"tcp://127.0.0.1:{closed}")
    assert done.returncode == 124, done.stderr
    (summary,) = [e for e in json_events(done.stderr) if e["event"] == "summary"]
    # attempts at 0, 0.7, 1.4, 2.1: four at most, two at the least on a slow machine
    assert 2 <= summary["attempts"] <= 4, summary
    fast = waitfor_cli("-o", "json", "-t", "2.2", f"tcp://127.0.0.1:{closed}")
    (summary,) = [e for e in json_events(fast.stderr) if e["event"] == "summary"]
    assert summary["attempts"] > 4  # the default backoff starts at 50 ms: 7 when idle


def test_delay_puts_the_first_attempt_off_and_the_deadline_stays() -> None:
    closed = free_port()
    done = waitfor_cli("-o", "json", "--delay", "0.8", "-t", "1.8", f"tcp://127.0.0.1:{closed}")
    assert done.returncode == 124, done.stderr
    events = json_events(done.stderr)
    first = next(e for e in events if e["event"] == "not_ready")
    timed_out = next(e for e in events if e["event"] == "timed_out")
    assert first["elapsed"] >= 0.8
    assert 1.8 <= timed_out["elapsed"] < 3.3  # from the start, not from the first attempt


def test_delay_then_ready() -> None:
    with http_server() as (url, script):
        done = waitfor_cli("-o", "json", "--delay", "0.5", "-t", "10", f"{url}/")
        assert done.returncode == 0, done.stderr
        assert len(script.requests) == 1
    ready = next(e for e in json_events(done.stderr) if e["event"] == "ready")
    assert ready["elapsed"] >= 0.5


def test_delay_in_the_library() -> None:
    began = attempt_times(f"tcp://127.0.0.1:{free_port()}", timeout=1.6, delay="0.6s")
    assert began
    assert began[0] >= 0.6


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--interval", "0"], {}, "'--interval': must be at least 0.01s"),
        (["--interval", "-1s"], {}, "'-1s' is not a duration"),
        (["--interval", "5ms"], {}, "must be at least 0.01s"),
        ([], {"WAITFOR_INTERVAL": "0"}, "WAITFOR_INTERVAL: must be at least 0.01s"),
        (["--interval", "1s", "--max-interval", "2s"], {}, "does not go with --max-interval"),
        (["--delay", "-1"], {}, "'-1' is not a duration"),
        (["--delay", "5s", "-t", "5s"], {}, "delay 5s is not shorter than the timeout 5s"),
        (["--delay", "1m"], {}, "delay 60s is not shorter than the timeout 60s"),
        # at least one attempt after the delay: an attempt 10 ms before the deadline is none
        (["--delay", "1.99", "-t", "2"], {}, "delay 1.99s leaves 0.01s of the timeout 2s:"),
        (["--delay", "59.5s"], {}, "the first attempt needs at least 1s"),
        (["--delay", "1", "-t", "1.5", "--attempt-timeout", "0.6"], {}, "needs at least 0.6s"),
        ([], {"WAITFOR_DELAY": "4.5", "WAITFOR_TIMEOUT": "5"}, "delay 4.5s leaves 0.5s"),
    ],
)
def test_bad_values_are_one_line_exit_2(args: list[str], env: dict[str, str], said: str) -> None:
    done = waitfor_cli(*args, "tcp://127.0.0.1:1", **env)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1, lines
    assert said in lines[0], lines


def test_delay_with_a_wait_forever_is_fine() -> None:
    with http_server() as (url, _):
        done = waitfor_cli("--delay", "0.2", "-t", "0", f"{url}/")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("keywords", "said"),
    [
        ({"interval": 0}, "interval must be a positive number"),
        ({"interval": "1ms"}, "interval must be at least 0.01s"),
        ({"interval": 1, "backoff": Backoff()}, "interval or backoff, not both"),
        ({"delay": 2, "timeout": 2}, "delay 2s is not shorter than the timeout 2s"),
        ({"delay": 1.99, "timeout": 2}, "the first attempt needs at least 1s"),
        ({"delay": "soon"}, "delay: 'soon' is not a duration"),
    ],
)
def test_bad_library_values(keywords: dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        wait_for("tcp://127.0.0.1:1", **keywords)


def test_a_delay_may_leave_one_whole_attempt_timeout_when_that_is_shorter() -> None:
    began = attempt_times(
        f"tcp://127.0.0.1:{free_port()}", timeout=0.8, delay=0.5, attempt_timeout=0.2
    )
    assert began
    assert began[0] >= 0.5


def test_the_attempt_after_a_delay_has_its_room_and_an_answer() -> None:
    """The least delay accepted leaves 1 s: the first attempt after it gets a real answer,
    and the deadline still holds (an http target: its client is imported in that attempt)."""
    done = waitfor_cli("-o", "json", "--delay", "1", "-t", "2", f"http://127.0.0.1:{free_port()}/")
    assert done.returncode == 124, done.stderr
    (summary,) = [e for e in json_events(done.stderr) if e["event"] == "summary"]
    assert summary["attempts"] >= 1
    assert "connection refused" in summary["reason"], summary


def test_a_targets_own_interval_paces_it_alone() -> None:
    with http_server() as (url, slow), http_server() as (other, fast):
        slow.status = fast.status = 503
        began: dict[str, list[float]] = {}

        def seen(event: Event) -> None:
            if event.type is EventType.ATTEMPT:
                began.setdefault(str(event.target), []).append(event.elapsed)

        with pytest.raises(WaitTimeout):
            wait_for(f"{url}/#interval=0.5s", f"{other}/", timeout=2.2, on_event=seen)
    paced = began[f"{url}/#interval=0.5s"]
    gaps = [b - a for a, b in itertools.pairwise(paced)]
    assert gaps
    assert all(gap >= 0.49 for gap in gaps), gaps
    assert len(paced) <= 5
    # the other one kept the backoff (50 ms, 100 ms, ...): some of its gaps are shorter
    others = began[f"{other}/"]
    assert any(b - a < 0.45 for a, b in itertools.pairwise(others)), others


@pytest.mark.parametrize(
    ("fragment", "said"),
    [
        ("#interval=0", "interval must be at least 0.01s"),
        ("#interval=-1s", "interval: '-1s' is not a duration"),
        ("#interval=1s&interval=2s", "'interval' given more than once"),
    ],
)
def test_bad_target_intervals(fragment: str, said: str) -> None:
    done = waitfor_cli(f"tcp://127.0.0.1:1{fragment}")
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1
    assert said in lines[0], lines
