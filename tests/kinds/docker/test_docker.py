"""docker: / container: targets against a real engine: Podman's API service, real containers,
``podman inspect`` as the oracle (tests/support/engine.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.engine import (
    Containers,
    HealthTimer,
    api_service,
    base_image,
    containers,
)
from tests.support.engine import inspect as oracle
from tests.support.podman import podman
from tests.support.servers import Script, unix_http_server
from waitfor.base.deadline import Deadline
from waitfor.core.registry import check_class
from waitfor.core.targets import parse_target
from waitfor.kind import Outcome
from waitfor.kinds.docker.engine import demultiplex, endpoint_from_env, since_after

#: a new machine's first run makes the base image (images/build: debootstrap, minutes), in the
#: module fixture, whose time counts against the first test's timeout
pytestmark = pytest.mark.timeout(1500)

#: the "-later" containers turn healthy / print their line when the test touches this file
GO = "/run/go"  # inside the container
FOREVER = ("sleep", "infinity")


class Engine:
    def __init__(self, sock: str, made: Containers) -> None:
        self.sock, self.made = sock, made
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{sock}"}

    def name(self, role: str) -> str:
        return self.made.name(role)


@pytest.fixture(scope="module")
def podman_engine() -> Iterator[Engine]:
    image = base_image()
    with api_service() as sock, containers(image) as made:
        health = ("--health-interval=1s", "--health-retries=1")
        made.run("running", *FOREVER)
        made.run(
            "healthy-later",
            *FOREVER,
            # failures in the start period leave it "starting", as Docker's do
            options=(f"--health-cmd=test -e {GO}", "--health-start-period=120s", *health),
        )
        made.run(
            "unhealthy",
            *FOREVER,
            # a check that prints two lines and a terminal escape: the reason shows one line
            options=(r"--health-cmd=printf 'db down\n\033[31mred\n'; exit 1", *health),
        )
        made.run("exited-0", "true")
        made.run("exited-3", "sh", "-c", "exit 3")
        made.run(
            "logs-later",
            "sh",
            "-c",
            f"echo starting; until [ -e {GO} ]; do sleep 0.2; done; echo 'listening on 8080';"
            " exec sleep infinity",
        )
        made.run("tty", "sh", "-c", "echo tty says hi; exec sleep infinity", options=("-t",))
        checked = [made.name("healthy-later"), made.name("unhealthy")]
        with HealthTimer(checked):
            yield Engine(sock, made)


def waitfor(engine: Engine, *args: str, later: str = "") -> subprocess.CompletedProcess[str]:
    """The command; ``later``: a container told to go (GO) once the command has waited a while."""
    run = subprocess.Popen(
        [sys.executable, "-m", "waitfor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=engine.env,
    )
    try:
        if later:
            time.sleep(2)
            assert run.poll() is None, "ready before it was told to be"
            podman("exec", later, "touch", GO)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    return subprocess.CompletedProcess(run.args, run.returncode, out, err)


def probe(target: str, env: dict[str, str]) -> Outcome:
    """One attempt of the target's check, as the runner makes it."""
    saved = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = env["DOCKER_HOST"]
    try:
        parsed = parse_target(target)
    finally:
        if saved is None:
            del os.environ["DOCKER_HOST"]
        else:
            os.environ["DOCKER_HOST"] = saved
    check = check_class(parsed.scheme)(parsed)
    quick = check.probe_now(Deadline.after(10))

    async def once() -> Outcome:
        try:
            return await check.probe(Deadline.after(10))
        finally:
            await check.aclose()

    outcome = asyncio.run(once())
    # the quick first attempt: the same ready outcome, or None (left to the runner)
    assert quick == (outcome if outcome.ready and "#log=" not in target else None), target
    return outcome


def expected(state: dict[str, Any], exited: int | None) -> bool:
    """Ready by podman inspect's account: running (and healthy if checked), or exited N."""
    if exited is not None:
        return bool(state["Status"] == "exited" and state["ExitCode"] == exited)
    health = (state.get("Health") or {}).get("Status") or ""
    return bool(state["Status"] == "running" and health in ("", "healthy"))


ROLES = ("running", "healthy-later", "unhealthy", "exited-0", "exited-3", "logs-later", "tty")


def agree(engine: Engine) -> list[tuple[str, str, bool]]:
    """Every container in every mode, waitfor's verdict beside the oracle's, row by row."""
    rows = []
    for role in ROLES:
        name = engine.name(role)
        for fragment, exited in (("", None), ("#exited=0", 0), ("#exited=3", 3)):
            for _ in range(3):  # the oracle before and after: a row that changed meanwhile again
                before = expected(oracle(name), exited)
                outcome = probe(f"docker:{name}{fragment}", engine.env)
                if expected(oracle(name), exited) == before:
                    break
            assert outcome.ready == before, (role, fragment, outcome.reason, oracle(name))
            rows.append((role, fragment, outcome.ready))
    return rows


def test_every_row_agrees_with_podman_inspect_and_health_is_waited_for(
    podman_engine: Engine,
) -> None:
    name = podman_engine.name("healthy-later")
    assert oracle(name)["Health"]["Status"] == "starting"  # the module's first test
    first = {(role, fragment) for role, fragment, ready in agree(podman_engine) if ready}
    assert ("healthy-later", "") not in first
    done = waitfor(podman_engine, "-t", "40", f"container:{name}", later=name)
    assert done.returncode == 0, done.stderr
    assert oracle(name)["Health"]["Status"] == "healthy"
    assert f"container {name} is running, health is starting (" in done.stderr, done.stderr
    assert f"container {name} is running and healthy" in done.stderr
    then = {(role, fragment) for role, fragment, ready in agree(podman_engine) if ready}
    assert then == {
        ("running", ""),
        ("healthy-later", ""),
        ("logs-later", ""),
        ("tty", ""),
        ("exited-0", "#exited=0"),
        ("exited-3", "#exited=3"),
    }


def test_reasons_say_why_not_ready(podman_engine: Engine) -> None:
    unhealthy, exited3 = podman_engine.name("unhealthy"), podman_engine.name("exited-3")
    missing = podman_engine.name("never-made")
    deadline = time.monotonic() + 20  # the first check has run
    while oracle(unhealthy).get("Health", {}).get("Status") != "unhealthy":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    run = waitfor(
        podman_engine,
        "-o",
        "json",
        "-t",
        "1",
        f"docker:{unhealthy}",
        f"docker:{exited3}",
        f"docker:{missing}",
    )
    assert run.returncode == 124, run.stderr
    reasons = {}

    for line in run.stdout.splitlines() + run.stderr.splitlines():
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "summary":
                reasons[event["target"]] = event["reason"]
    assert reasons[f"docker:{unhealthy}"].startswith(
        f"container {unhealthy} is running, health is unhealthy (last check: exit 1: db down "
    ), reasons
    assert "\x1b" not in reasons[f"docker:{unhealthy}"]
    assert "\\x1b[31mred" in reasons[f"docker:{unhealthy}"]  # shown escaped, on one line
    assert reasons[f"docker:{exited3}"] == (
        f"container {exited3} is not running (status exited, code 3)"
    )
    assert reasons[f"docker:{missing}"] == f"no such container {missing}"


def test_exited_with_another_code_is_final(podman_engine: Engine) -> None:
    name = podman_engine.name("exited-3")
    run = waitfor(podman_engine, "-t", "20", f"docker:{name}#exited=0")
    assert run.returncode == 2, run.stderr
    assert f"container {name} exited with code 3, not 0 (no restart policy" in run.stderr
    assert waitfor(podman_engine, "-t", "5", f"docker:{name}#exited=3").returncode == 0


def test_a_log_line_that_comes_later(podman_engine: Engine) -> None:
    name = podman_engine.name("logs-later")
    assert waitfor(podman_engine, "-t", "1", rf"docker:{name}#log=^listening on").returncode == 124
    run = waitfor(podman_engine, "-t", "30", rf"docker:{name}#log=^listening on \d+$", later=name)
    assert run.returncode == 0, run.stderr
    logs = subprocess.run(
        ["podman", "logs", name], capture_output=True, text=True, env=podman_engine.env
    )
    assert "listening on 8080" in logs.stdout  # the oracle: the line is there
    never = waitfor(podman_engine, "-t", "1", f"docker:{name}#log=^never$")
    assert never.returncode == 124
    assert (
        f"no line of container {name}'s logs matches '^never' yet (status running)"
        in (never.stderr.replace("$'", "'"))
        or f"no line of container {name}'s logs matches '^never$' yet" in never.stderr
    )
    # ^ is a line's start: "starting" is a line, "tarting" starts none
    assert waitfor(podman_engine, "-t", "5", f"docker:{name}#log=^starting$").returncode == 0
    assert waitfor(podman_engine, "-t", "1", f"docker:{name}#log=^tarting").returncode == 124


def test_a_tty_containers_logs(podman_engine: Engine) -> None:
    run = waitfor(
        podman_engine, "-t", "10", f"docker:{podman_engine.name('tty')}#log=^tty says hi$"
    )
    assert run.returncode == 0, run.stderr


def test_logs_longer_than_a_batch_are_read_on(podman_engine: Engine) -> None:
    """3 MB of lines (12 batches) and then the line: found, the log read a batch at a time."""
    name = podman_engine.made.run(
        "chatty",
        "sh",
        "-c",
        'i=0; while [ $i -lt 30000 ]; do echo "line $i $(printf %080d 0)"; i=$((i+1)); done;'
        " echo the end; exec sleep infinity",
    )
    run = waitfor(podman_engine, "-t", "40", f"docker:{name}#log=^the end$")
    assert run.returncode == 0, run.stderr


def test_a_refusing_socket_and_no_socket(tmp_path: Path) -> None:
    stale = tmp_path / "engine.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(stale))  # bound, never listening: refused
        reason = probe("docker:app", {"DOCKER_HOST": f"unix://{stale}"}).reason
    assert reason == (
        f"engine socket {stale}: connection refused (a socket file with nothing listening)"
    )
    gone = probe("docker:app", {"DOCKER_HOST": f"unix://{tmp_path}/none.sock"}).reason
    assert gone == f"engine socket {tmp_path}/none.sock: no such file or directory"


def test_docker_host_tcp(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens
        reason = probe("docker:app", {"DOCKER_HOST": f"tcp://127.0.0.1:{port}"}).reason
    assert reason.startswith(f"engine at tcp://127.0.0.1:{port}: connection refused"), reason


@pytest.mark.parametrize(
    ("target", "env", "message"),
    [
        ("docker:", {}, "missing container name: docker:NAME"),
        ("docker:a/b", {}, "a container name is letters, digits and _.-"),
        ("docker:-x", {}, "a container name is letters, digits and _.-"),
        ("docker:app#exited=256", {}, "exited must be an exit code 0-255, not '256'"),
        ("docker:app#exited=0&log=x", {}, "give exited or log, not both"),
        ("docker:app#log=(?=x)", {}, "log regex '(?=x)' is invalid"),
        ("docker:app#log=", {}, "log must be a pattern, not empty"),
        ("docker:app#health=1", {}, "unknown option 'health' (known: exited, log)"),
        ("docker:app", {"DOCKER_HOST": "ssh://me@host"}, "DOCKER_HOST ssh:// is not supported"),
        ("docker:app", {"DOCKER_HOST": "/var/run/docker.sock"}, "DOCKER_HOST must be unix:///"),
        ("docker:app", {"DOCKER_HOST": "unix://relative.sock"}, "must name an absolute socket"),
        ("docker:app", {"DOCKER_HOST": "tcp://h:2376", "DOCKER_TLS_VERIFY": "1"}, "TLS to the"),
        ("docker:app", {"DOCKER_HOST": "tcp://u:pw@h:2375"}, "must be tcp://HOST[:PORT]"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(target: str, env: dict[str, str], message: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "waitfor", "-t", "1", target],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "DOCKER_HOST": "", **env},
    )
    assert run.returncode == 2, run.stderr
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert message in run.stderr
    assert "pw" not in run.stderr
    assert "me@" not in run.stderr


def test_the_default_sockets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert endpoint_from_env() is None
    if any(os.path.exists(p) for p in ("/var/run/docker.sock", "/run/podman/podman.sock")):
        pytest.skip("an engine socket exists here")
    reason = probe("docker:app", {"DOCKER_HOST": ""}).reason
    assert reason.startswith("no engine socket: neither /var/run/docker.sock nor")


def test_since_and_frames() -> None:
    assert since_after(b"2026-12-02T14:23:01Z") == "1796221380.999999000"
    assert since_after(b"2026-12-02T14:23:01.5Z") == "1796221381.499999000"
    assert since_after(b"2026-12-02T15:23:01.000002+01:00") == "1796221381.000001000"
    assert since_after(b"garbage") is None
    frames = bytearray(b"\x01\0\0\0\0\0\0\x03ab\n\x02\0\0\0\0\0\0\x05cd")
    assert demultiplex(frames) == b"ab\n"
    assert frames == b"\x02\0\0\0\0\0\0\x05cd"  # the cut frame waits for its rest
    frames += b"e\n\n"
    assert demultiplex(frames) == b"cde\n\n"
    assert not frames


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (
            500,
            b'{"message": "boom\\u001b[2J\\nwaitfor: forged ready"}',
            "the engine answered HTTP 500: boom\\x1b[2J waitfor: forged ready",
        ),
        (200, b"<html>not an engine</html>", "the engine's answer is not JSON"),
        (200, b'{"Id": "x"}', "the engine's answer has no container State"),
    ],
)
def test_what_a_strange_engine_answers(
    tmp_path: Path, status: int, body: bytes, reason: str
) -> None:
    sock = tmp_path / "engine.sock"
    with unix_http_server(str(sock), Script(status=status, body=body)) as script:
        assert probe("docker:app", {"DOCKER_HOST": f"unix://{sock}"}).reason == reason
    assert script.requests[0][:2] == ("GET", "/containers/app/json")


def test_a_silent_engine_holds_nothing_past_the_deadline(tmp_path: Path) -> None:
    sock = tmp_path / "engine.sock"
    with unix_http_server(str(sock), Script(delay=8)):
        started = time.monotonic()
        run = subprocess.run(
            [sys.executable, "-m", "waitfor", "-t", "1.5", "docker:app"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "DOCKER_HOST": f"unix://{sock}"},
        )
        took = time.monotonic() - started
    assert run.returncode == 124, run.stderr
    assert took < 4, took
    assert "still not ready after 1.5" in run.stderr
