"""--stable / #stable=: ready only after answering ready for a while without a failure.

The runner's rules against the scripted kind (a third-party kind as far as waitfor knows), then
real servers that come up, go away and come back: TCP, HTTP, and PostgreSQL started the way the
official image's entrypoint starts it (a temporary server for the init scripts, stopped, then
the real one).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from tests.support.command import waitfor
from tests.support.fakes import BEHAVIOURS
from tests.support.fast import FAST
from tests.support.pg import Cluster
from tests.support.ports import free_port
from tests.support.servers import Script, http_server, tcp_listener
from tests.support.targets import refusals
from waitfor import api
from waitfor.base.backoff import Backoff
from waitfor.core.runner import Event, EventType, run
from waitfor.core.targets import Target, parse_target
from waitfor.errors import WaitTimeout
from waitfor.kind import Outcome

UP = Outcome.up("up")
DOWN = Outcome.down("refused")
MakeTarget = Callable[..., Target]


def wait(
    targets: list[Target],
    *,
    stable: float,
    timeout: float = 10,
    invert: bool = False,
    backoff: Backoff = FAST,
    events: list[Event] | None = None,
) -> list[object]:
    return list(
        asyncio.run(
            run(
                targets,
                timeout=timeout,
                attempt_timeout=5,
                backoff=backoff,
                invert=invert,
                on_event=(events.append if events is not None else None),
                stable=stable,
            )
        )
    )


def test_a_failure_restarts_the_window(fake: MakeTarget) -> None:
    events: list[Event] = []
    target = fake("a", UP, DOWN, UP)
    wait([target], stable=0.3, events=events)
    reasons = [e.reason for e in events if e.type is EventType.NOT_READY]
    assert reasons[:3] == ["ready for 0.0s of 0.3s (up)", "refused", "ready for 0.0s of 0.3s (up)"]
    ready = [e for e in events if e.type is EventType.READY]
    assert len(ready) == 1
    # the window began at the third probe: readiness is at least 0.3s after it
    third = [e for e in events if e.type is EventType.ATTEMPT][2]
    assert ready[0].elapsed - third.elapsed >= 0.3
    # probed at the cap (0.05s) meanwhile: several probes, not one long sleep
    assert BEHAVIOURS["a"].probes >= 3 + 4


def test_at_least_two_probes_confirm_even_with_a_long_cap(fake: MakeTarget) -> None:
    started = time.monotonic()
    wait([fake("a", UP)], stable=0.2, backoff=Backoff(initial=0.01, maximum=30))
    assert BEHAVIOURS["a"].probes == 2  # the first opens the window, the second closes it
    assert 0.2 <= time.monotonic() - started < 5  # never the 30s cap: the window's end


def test_timing_out_in_the_window_says_how_long_it_held(fake: MakeTarget) -> None:
    with pytest.raises(WaitTimeout) as info:
        wait([fake("a", UP)], stable=60, timeout=0.5)
    (result,) = info.value.results
    assert not result.ready
    assert result.reason.startswith("ready for 0.")
    assert result.reason.endswith("s of 60s (up)")


def test_invert_waits_for_down_that_stays_down(fake: MakeTarget) -> None:
    events: list[Event] = []
    wait([fake("a", DOWN, UP, DOWN)], stable=0.2, invert=True, events=events)
    reasons = [e.reason for e in events if e.type is EventType.NOT_READY]
    assert reasons[:3] == ["down for 0.0s of 0.2s", "still up, up", "down for 0.0s of 0.2s"]
    assert events[-1].type is EventType.READY


def test_a_targets_own_stable_wins(fake: MakeTarget) -> None:
    fake("a", UP)
    fake("b", UP)
    quick = parse_target("fake://a#stable=0")
    slow = parse_target("fake://b#stable=250ms")
    assert (quick.stable, slow.stable) == (0.0, 0.25)
    events: list[Event] = []
    wait([quick, slow], stable=30, timeout=10, events=events)
    assert BEHAVIOURS["a"].probes == 1
    assert BEHAVIOURS["b"].probes >= 2


test_bad_stable_is_a_one_line_target_error = refusals(
    [
        ("tcp://db:5432#stable=soon", "stable: 'soon' is not a duration"),
        ("tcp://db:5432#stable=1s&stable=2s", "option 'stable' given more than once"),
        ("tcp://db:5432#stable=99999h", "is too long"),
        ("tcp://db:5432#stable=-1", "is not a duration"),
        ("postgresql://u:hunter2@db/x#stable=%FF", "is not a duration"),
    ],
    regex=False,
    hidden=["hunter2"],
)


def test_every_kind_takes_stable_and_its_own_options_are_unchanged() -> None:
    assert parse_target("http://a/#status=204&stable=2s").stable == 2.0
    assert parse_target("exec:true#stable=1").stable == 1.0
    assert parse_target("file:///tmp/x#stable=1").stable == 1.0
    assert parse_target("tcp://a:1").stable is None


def test_stable_does_not_end_on_the_quick_path() -> None:
    port = free_port()
    with tcp_listener(port):
        wait_ = api.Wait(f"tcp://127.0.0.1:{port}", stable="0.3s", timeout=10)
        assert wait_.ready_now() is None
        started = time.monotonic()
        (result,) = wait_.run_sync()
        assert result.ready
        assert time.monotonic() - started >= 0.3
        assert result.attempts >= 2


def cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "waitfor", "-o", "json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(
    process: subprocess.Popen[str], seen: list[dict[str, object]] | None = None
) -> tuple[int, list[dict[str, object]], str]:
    try:
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    return process.returncode, [*(seen or []), *lines], err


def until_said(
    process: subprocess.Popen[str], seen: list[dict[str, object]], says: Callable[[str], bool]
) -> None:
    """Reads the waiter's JSON lines into ``seen`` until a not_ready reason ``says`` so: a flap
    the test makes is one the waiter has seen, whatever the moment its attempts fall on."""
    assert process.stderr is not None
    while line := process.stderr.readline():
        event = json.loads(line)
        seen.append(event)
        if event["event"] == "not_ready" and says(str(event["reason"])):
            return
    raise AssertionError(f"the waiter ended first: {seen}")


def test_tcp_server_that_flaps_is_ready_only_once_it_stays_up() -> None:
    port = free_port()
    process = cli("--stable", "1.5s", "-t", "30", f"tcp://127.0.0.1:{port}")
    seen: list[dict[str, object]] = []
    with tcp_listener(port):
        until_said(process, seen, lambda reason: reason.startswith("ready for 0.0s of 1.5s"))
    until_said(process, seen, lambda reason: "refused" in reason)  # the gap was seen
    with tcp_listener(port) as opened:
        back = opened[0]
        code, _, err = finish(process, seen)
        ended = time.monotonic()
    assert code == 0, err
    assert ended - back >= 1.5


def test_http_status_that_flaps_is_ready_only_once_it_stays_2xx() -> None:
    script = Script(status=200)
    with http_server(script) as (base, _):
        process = cli("--stable", "1.2s", "-t", "30", f"{base}/healthz")
        seen: list[dict[str, object]] = []
        until_said(process, seen, lambda reason: reason.startswith("ready for"))
        script.status = 503
        until_said(process, seen, lambda reason: "503" in reason)
        script.status = 200
        back = time.monotonic()
        code, lines, err = finish(process, seen)
        ended = time.monotonic()
    assert code == 0, err
    assert ended - back >= 1.2
    reasons = [str(line["reason"]) for line in lines if line["event"] == "not_ready"]
    assert any(r.startswith("ready for") and "of 1.2s" in r for r in reasons)


def test_postgres_image_init_pattern(pg_cluster: Callable[[], Cluster]) -> None:
    """docker-entrypoint.sh: initdb, a temporary server for the init scripts, stopped, the real
    one. Without --stable a waiter lets the app in while the temporary one is about to stop."""
    cluster = pg_cluster()
    url = cluster.url()
    plain = cli("-t", "60", url)
    steady = cli("--stable", "2s", "-t", "60", url)
    cluster.start()  # the temporary server: /docker-entrypoint-initdb.d runs against it
    temporary_up = time.monotonic()
    code, _, err = finish(plain)
    assert code == 0, err  # a plain waiter is done while init scripts still run
    assert time.monotonic() - temporary_up < 10
    time.sleep(0.8)  # the init scripts
    cluster.stop("fast")
    time.sleep(0.5)  # the entrypoint's exec of the real server
    # its window cannot begin before this; it can before start() returns (pg_ctl polls the
    # server that already accepts: 1.995 s from the return was seen)
    real_starting = time.monotonic()
    cluster.start()
    code, lines, err = finish(steady)
    ended = time.monotonic()
    assert code == 0, err
    assert ended - real_starting >= 2.0
    reasons = [str(line["reason"]) for line in lines if line["event"] == "not_ready"]
    assert any(r.startswith("ready for") and "accepting connections" in r for r in reasons)
    assert any("ready for" not in r for r in reasons)  # the restart was seen as down


def test_stable_from_the_environment_and_the_command_line() -> None:
    port = free_port()
    with tcp_listener(port):
        result = waitfor("-o", "json", f"tcp://127.0.0.1:{port}", env={"WAITFOR_STABLE": "0.5s"})
    assert result.returncode == 0, result.stderr
    assert "of 0.5s" in result.stderr
    bad = waitfor("--stable", "forever", "tcp://a:1")
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1
    assert "Traceback" not in bad.stderr


WAITFOR_JSON = [sys.executable, "-m", "waitfor", "-o", "json"]


@pytest.mark.parametrize("invert", [False, True], ids=["ready", "inverted"])
def test_the_window_is_said_as_not_stable_yet_never_not_ready(invert: bool) -> None:
    """Every answer was ready: "not ready: ready for 0.0s of 1s" contradicted itself."""
    port = free_port()
    with tcp_listener(port) if not invert else contextlib.nullcontext():
        run = subprocess.run(
            [sys.executable, "-m", "waitfor", "--stable", "0.5s", "-t", "20"]
            + ["--invert"] * invert
            + [f"tcp://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert run.returncode == 0, run.stderr
    said = "down" if invert else "ready"
    assert f"not stable yet: {said} for 0.0s of 0.5s" in run.stderr
    assert f"not {said}:" not in run.stderr
    json_run = subprocess.run(
        [*WAITFOR_JSON, "--stable", "0.5s", "-t", "20", "--invert", f"tcp://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    holding = [json.loads(line) for line in json_run.stderr.splitlines() if "holding" in line]
    assert holding
    assert all(e["event"] == "not_ready" and e["holding"] is True for e in holding)
