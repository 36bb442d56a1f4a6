"""The synchronous first attempt (waitfor.core.first_attempt) gives exactly what the runner gives.

Every input the quick path accepts (ready targets of kinds with ``probe_now``) is run through the
CLI twice, in this process: as shipped, and with the quick path switched off so the event loop
runs the wait. Exit code, the command exec'd and every line (timings aside) must be the same.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, redirect_stderr
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.imports import run_listing_imports
from tests.support.ports import free_port
from tests.support.redisd import Memcached, RedisServer
from tests.support.servers import (
    Script,
    http_server,
    server_factory,
    tcp_listener,
    unix_http_server,
)
from waitfor import WaitTimeout, wait_for
from waitfor.cli import command as cli
from waitfor.cli.reading import READ_ELSEWHERE
from waitfor.core import first_attempt as quickstart
from waitfor.core.events import Event
from waitfor.core.targets import parse_target

_TIMING = re.compile(r"\d+\.\d+s")
#: how many attempts fit before a deadline depends on the machine's load, not on the path
_ATTEMPTS_TO_DEADLINE = re.compile(r"(still not ready after Ts) \(\d+ attempts?\)")


@pytest.fixture(scope="module")
def ports() -> Iterator[dict[str, Any]]:
    """Listening ports: IPv4 (twice) and IPv6 loopback; a Unix socket, ``sock``; a redis-server
    wanting the password ``q-pass``, ``redis``; and a memcached, ``memcached``."""
    with ExitStack() as stack:
        v4, other = free_port(), free_port()
        v6 = free_port(socket.AF_INET6, "::1")
        stack.enter_context(tcp_listener(v4))
        stack.enter_context(tcp_listener(other))
        stack.enter_context(tcp_listener(v6, host="::1"))
        root = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        sock = f"{root}/app.sock"
        stack.enter_context(unix_http_server(sock))  # accepts, so its backlog never fills
        redis = stack.enter_context(server_factory(RedisServer, root))("--requirepass", "q-pass")
        memcached = stack.enter_context(server_factory(Memcached, root))()
        for server in (redis, memcached):
            server.start()
        yield {
            "v4": v4,
            "other": other,
            "v6": v6,
            "sock": sock,
            "redis": redis.port,
            "memcached": memcached.port,
        }


def run_cli(argv: list[str], quick: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """(exit code, command exec'd, stderr lines) of one in-process CLI run."""
    execd: list[list[str]] = []

    def no_exec(command: list[str]) -> None:
        execd.append(list(command))
        raise SystemExit(0)

    with monkeypatch.context() as patch:
        patch.setattr(cli, "exec_command", no_exec)
        if not quick:
            patch.setattr(quickstart, "all_ready_now", lambda *a, **k: None)
        err = io.StringIO()
        with redirect_stderr(err), pytest.raises(SystemExit) as info:
            cli.main(argv)
    return info.value.code, execd, err.getvalue().splitlines()


def normalized(lines: list[str], json_lines: bool) -> tuple[Any, ...]:
    """Timings out, and the number of attempts a deadline cut off; concurrent targets may turn
    ready in any order on the event loop."""
    if json_lines:
        records = [json.loads(line) for line in lines]
        for record in records:
            record.pop("time", None)
            record.pop("elapsed", None)
            if record.get("event") == "timed_out" or record.get("ready") is False:
                record.pop("attempt", None)
                record.pop("attempts", None)
        rows = [json.dumps(r, sort_keys=True) for r in records]
    else:
        rows = [
            _ATTEMPTS_TO_DEADLINE.sub(r"\1 (N attempts)", _TIMING.sub("Ts", line)) for line in lines
        ]
    summaries = [r for r in rows if '"summary"' in r or " ready after " in r]
    others = [r for r in rows if r not in summaries]
    return (others[:1], sorted(others[1:]), summaries)


TARGETS = st.lists(
    st.sampled_from(
        [
            "tcp://127.0.0.1:{v4}",
            "tcp://localhost:{v4}",
            "TCP://127.0.0.1:{other}/",
            "tcp://[::1]:{v6}",
            "tcp://127.0.0.1:{other}",
            # the machine's PostgreSQL (trust): a ping needs no credentials
            "postgresql://127.0.0.1:5432/postgres",
            "postgres://nosuchuser@localhost:5432/nodb?sslmode=disable",
            "host=/var/run/postgresql dbname=postgres#mode=ping",
            "file:///etc/hostname#nonempty",
            "file://localhost/etc",
            "unix://{sock}",
            "redis://127.0.0.1:{redis}",  # up, though it wants a password
            "redis://:q-pass@localhost:{redis}/2#mode=query",
            "memcached://127.0.0.1:{memcached}",
            # the machine's MariaDB: alive for a ping whether the login is accepted or refused
            "mysql://root@127.0.0.1:3306",
            "mariadb://nosuchuser@localhost:3306/nodb",
            "dns:localhost",  # /etc/hosts (nameservers: tests/kinds/dns/test_dns_quick.py)
            "dns:127.0.0.1#min=1",
        ]
    ),
    min_size=1,
    max_size=3,
)
OPTIONS = st.lists(
    st.sampled_from(
        [
            ["-o", "text"],
            ["-o", "json"],
            ["-q"],
            ["-t", "0"],
            ["-t", "90s"],
            ["--attempt-timeout", "0.5"],
            ["--max-interval", "1s"],
        ]
    ),
    max_size=3,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(targets=TARGETS, options=OPTIONS, command=st.sampled_from([[], ["--", "true", "a b"]]))
def test_the_quick_path_gives_exactly_what_the_runner_gives(
    ports: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    targets: list[str],
    options: list[list[str]],
    command: list[str],
) -> None:
    argv = [word for option in options for word in option]
    argv += [t.format(**ports) for t in targets] + command
    assert_ready_as_the_runner(argv, options, monkeypatch)


def assert_ready_as_the_runner(
    argv: list[str], options: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line, run with the quick path and without: ready, and the same words."""
    quick = run_cli(argv, True, monkeypatch)
    full = run_cli(argv, False, monkeypatch)
    assert quick[:2] == full[:2]
    assert quick[0] == 0
    outputs = [o[1] for o in options if o[0] == "-o"]
    json_lines = bool(outputs) and outputs[-1] == "json" and ["-q"] not in options
    assert normalized(quick[2], json_lines) == normalized(full[2], json_lines)


def test_it_answers_only_all_ready_and_says_nothing_otherwise(ports: dict[str, Any]) -> None:
    ready = parse_target(f"tcp://127.0.0.1:{ports['v4']}")
    refused = parse_target(f"tcp://127.0.0.1:{free_port()}")
    https = parse_target(f"https://127.0.0.1:{ports['v4']}/")  # no probe_now: event loop only
    missing = parse_target("file:///nonexistent/waitfor-token")
    for targets in ([ready, refused], [refused, ready], [ready, https], [ready, missing]):
        events: list[Event] = []
        now = time.monotonic()
        assert quickstart.all_ready_now(targets, started=now, budget=5, emit=events.append) is None
        assert events == []
    events = []
    now = time.monotonic()
    results = quickstart.all_ready_now([ready, ready], started=now, budget=5, emit=events.append)
    assert results is not None
    assert [r.reason for r in results] == [f"connected to 127.0.0.1:{ports['v4']}"] * 2
    assert [e.type.value for e in events] == ["attempt", "attempt", "ready", "ready"]


@pytest.mark.parametrize(
    "kind", ["tcp", "postgres", "file", "unix", "redis", "memcached", "mysql", "dns"]
)
def test_a_ready_run_never_imports_asyncio(
    ports: dict[str, Any], tmp_path: Path, kind: str
) -> None:
    target = {
        "tcp": f"tcp://127.0.0.1:{ports['v4']}",
        "postgres": "postgresql://127.0.0.1:5432/postgres?sslmode=disable",
        "file": "file:///etc/hostname",
        "unix": f"unix://{ports['sock']}",
        "redis": f"redis://:q-pass@127.0.0.1:{ports['redis']}#mode=query",
        "memcached": f"memcached://127.0.0.1:{ports['memcached']}",
        "mysql": "mysql://root@127.0.0.1:3306",
        "dns": "dns:localhost",
    }[kind]
    result, imported = run_listing_imports(tmp_path, target)
    assert result.returncode == 0, result.stderr
    assert f"waitfor.kinds.{kind}" in imported
    assert not imported & {"asyncio", "ssl", "waitfor.core.runner", "waitfor.net.aio", "dns"}
    assert "typing" not in imported  # ~2.5 ms of a start (waitfor/base/typing_lite.py)


def test_the_budget_scale_keeps_a_slow_ready_target_on_the_quick_path(tmp_path: Path) -> None:
    """An answer after 0.5 s outlasts the 0.25 s budget (the runner answers, with asyncio);
    WAITFOR_QUICK_BUDGET_SCALE (unhurried: 20) leaves it to the first attempt, still read
    without click and with no "unknown variable" warning."""
    env = {k: v for k, v in os.environ.items() if "WAITFOR_" not in k}
    with http_server(Script(delay=0.5)) as (url, _):
        hurried, imported = run_listing_imports(tmp_path, url, env=env)
        assert hurried.returncode == 0, hurried.stderr
        assert "asyncio" in imported
        unhurried, imported = run_listing_imports(tmp_path, url, env=env, unhurried=True)
    assert unhurried.returncode == 0, unhurried.stderr
    assert not imported & {"asyncio", "click", "waitfor.core.runner"}
    assert "unknown variable" not in unhurried.stderr


@pytest.mark.parametrize("scale", ["fast", "0", "-1", "inf", "nan", ""])
def test_a_budget_scale_that_is_no_positive_number_is_a_usage_error(scale: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "waitfor", "-t", "1", "tcp://127.0.0.1:1"],
        env={**os.environ, quickstart.BUDGET_SCALE: scale},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 2
    said = f"{quickstart.BUDGET_SCALE} must be a positive number (a factor of the budget)"
    assert result.stderr == f"waitfor: error: {said}\n"


def test_the_command_knows_the_budget_scale_is_read_elsewhere() -> None:
    assert quickstart.BUDGET_SCALE in READ_ELSEWHERE
    assert not cli.unknown_variables({quickstart.BUDGET_SCALE: "20"})


def test_the_time_of_an_unanswered_first_attempt_is_counted() -> None:
    """The synchronous attempt may use 0.25 s; when the runner's first attempt then runs into
    the deadline, the reason counts both, as one attempt (not "timed out after 0.0s")."""
    silent = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    with silent, pytest.raises(WaitTimeout) as info:
        wait_for(f"redis://127.0.0.1:{silent.getsockname()[1]}", timeout=0.26)
    [result] = info.value.results
    assert result.attempts == 1
    took = float(re.fullmatch(r"timed out after (\d+\.\d)s", result.reason).group(1))  # type: ignore[union-attr]
    assert took >= 0.2, result.reason


def test_the_runner_goes_on_with_the_checks_the_first_attempt_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a first attempt learnt (a 429's Retry-After, in the k8s kind) stays on its check:
    the runner probes the same objects, one per target."""
    from waitfor.kinds.tcp import TcpCheck

    asked: dict[str, list[TcpCheck]] = {"probe_now": [], "probe": []}  # held: ids stay unique
    probe_now, probe = TcpCheck.probe_now, TcpCheck.probe

    def spy_now(self: TcpCheck, deadline: Any) -> Any:
        asked["probe_now"].append(self)
        return probe_now(self, deadline)

    async def spy(self: TcpCheck, deadline: Any) -> Any:
        asked["probe"].append(self)
        return await probe(self, deadline)

    monkeypatch.setattr(TcpCheck, "probe_now", spy_now)
    monkeypatch.setattr(TcpCheck, "probe", spy)
    refused = [f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"]
    with pytest.raises(WaitTimeout):
        wait_for(*refused, timeout=0.5)
    assert len(asked["probe_now"]) == 1  # the first target refused: the runner takes over
    probed = {id(check) for check in asked["probe"]}
    assert len(probed) == 2  # one check per target
    assert id(asked["probe_now"][0]) in probed
