from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.command import waitfor
from tests.support.imports import run_listing_imports
from tests.support.ports import free_port
from tests.support.servers import Script, banner_server, http_server, tcp_listener
from waitfor import api
from waitfor.cli import command as cli
from waitfor.cli import reading


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "waitfor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def closed_port() -> int:
    return free_port()


class Passed:
    """Records what the CLI handed to the library, instead of waiting."""

    def __init__(self) -> None:
        self.targets: Sequence[str] = ()
        self.kwargs: dict[str, Any] = {}

    def __call__(self, *targets: str, **kwargs: Any) -> Passed:  # as api.Wait(...)
        self.targets, self.kwargs = targets, kwargs
        return self

    def run_sync(self, guard: object = None) -> list[object]:
        self.guard = guard
        return []


@pytest.fixture
def passed(monkeypatch: pytest.MonkeyPatch) -> Passed:
    recorder = Passed()
    monkeypatch.setattr(api, "Wait", recorder)
    return recorder


def run_cli(args: list[str], monkeypatch: pytest.MonkeyPatch, **env: str) -> int:
    for name in [n for n in os.environ if n.startswith("WAITFOR_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as info:
        cli.main(args)
    assert isinstance(info.value.code, int)
    return info.value.code


def test_cli_passes_options_on(
    passed: Passed, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    code = run_cli(
        [
            "-t",
            "5m",
            "--attempt-timeout",
            "2s",
            "--invert",
            "--insecure",
            "--cacert",
            str(ca),
            "--max-interval",
            "2",
            "tcp://a:1",
            "http://b",
        ],
        monkeypatch,
    )
    assert code == 0
    assert passed.targets == ("tcp://a:1", "http://b")
    kw = passed.kwargs
    assert (kw["timeout"], kw["attempt_timeout"], kw["invert"]) == (300, 2, True)
    assert kw["defaults"] == {"insecure": "true", "cacert": str(ca)}
    assert kw["backoff"].maximum == 2


def test_env_configuration(passed: Passed, monkeypatch: pytest.MonkeyPatch) -> None:
    code = run_cli(
        [],
        monkeypatch,
        WAITFOR_TARGETS=" tcp://a:1\n  http://b ",
        WAITFOR_TIMEOUT="90s",
        WAITFOR_INVERT="true",
        WAITFOR_ATTEMPT_TIMEOUT="1",
    )
    assert code == 0
    assert passed.targets == ("tcp://a:1", "http://b")
    assert (passed.kwargs["timeout"], passed.kwargs["invert"]) == (90, True)
    assert passed.kwargs["attempt_timeout"] == 1


def test_command_line_wins_over_env(passed: Passed, monkeypatch: pytest.MonkeyPatch) -> None:
    assert (
        run_cli(
            ["-t", "3", "tcp://c:3"], monkeypatch, WAITFOR_TARGETS="tcp://a:1", WAITFOR_TIMEOUT="90"
        )
        == 0
    )
    assert passed.targets == ("tcp://c:3",)
    assert passed.kwargs["timeout"] == 3


def test_timeout_zero_waits_forever(passed: Passed, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_cli(["-t", "0", "tcp://a:1"], monkeypatch) == 0
    assert passed.kwargs["timeout"] is None


BAD_INPUTS = [
    ([], {}, "no targets given"),
    (["nope"], {}, "invalid target 'nope': missing scheme"),
    (["tcp://a"], {}, "invalid target 'tcp://a': missing port"),
    (["-t", "-1", "tcp://a:1"], {}, "'-1' is not a duration"),
    (["-t", "nan", "tcp://a:1"], {}, "'nan' is not a duration"),
    (["--attempt-timeout", "0", "tcp://a:1"], {}, "--attempt-timeout"),
    (["--max-interval", "0", "tcp://a:1"], {}, "must be at least 0.01s"),
    (["--bogus", "tcp://a:1"], {}, "--bogus"),
    (["-o", "xml", "tcp://a:1"], {}, "'xml' is not one of"),
    (["--cacert", "/nonexistent", "tcp://a:1"], {}, "does not exist"),
    (
        [],
        {"WAITFOR_TIMEOUT": "soon", "WAITFOR_TARGETS": "tcp://a:1"},
        "'soon' is not a duration",
    ),
    (["http://u:hunter2@h:99999"], {}, "invalid port"),
    (["redis://:hunter2%FF@db"], {}, "the password is not valid UTF-8"),
    (["mysql://u:hunter2%FF@db/app"], {}, "the password is not valid UTF-8"),
    (["memcached://u:hunter2%FF@cache"], {}, "the password is not valid UTF-8"),
]


@pytest.mark.parametrize(("args", "env", "message"), BAD_INPUTS)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], env: dict[str, str], message: str
) -> None:
    env = {"WAITFOR_TARGETS": "", **env}
    result = waitfor(*args, env=env)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("waitfor: error: ")
    assert message in lines[0]
    assert "hunter2" not in result.stderr


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """Every line of stderr as JSON (fails on the first that is not)."""
    return [json.loads(line) for line in stderr.splitlines()]


@pytest.mark.parametrize("asked", ["-o json", "--output=json", "WAITFOR_OUTPUT=json"])
@pytest.mark.parametrize(
    ("args", "env", "message"), [bad for bad in BAD_INPUTS if "-o" not in bad[0]]
)
def test_with_json_output_errors_are_json_too(
    asked: str, args: list[str], env: dict[str, str], message: str
) -> None:
    env = {"WAITFOR_TARGETS": "", **env}
    if asked.startswith("WAITFOR_"):
        env["WAITFOR_OUTPUT"] = "json"
    else:
        args = [*asked.split(), *args]
    result = waitfor(*args, env=env)
    assert result.returncode == 2
    [record] = json_lines(result.stderr)
    assert (record["event"], record["exit_code"]) == ("error", 2)
    assert message in record["reason"]
    assert "hunter2" not in result.stderr


def test_with_json_output_every_way_to_fail_is_json(tmp_path: Path) -> None:
    """A permanent failure, a missing command, a signal: each ends with an ``error`` event."""
    with banner_server(b"S") as port:  # agrees to TLS: now the root certificate is needed
        target = f"postgresql://127.0.0.1:{port}/x?sslmode=verify-full&sslrootcert={tmp_path}/none"
        failed = waitfor("-o", "json", "-t", "5", target)
    assert failed.returncode == 2
    records = json_lines(failed.stderr)
    assert [r["event"] for r in records][-2:] == ["failed", "error"]
    assert "root certificate file" in records[-1]["reason"]

    port = free_port()
    with tcp_listener(port):
        missing = waitfor("-o", "json", f"tcp://127.0.0.1:{port}", "--", "no-such-command-xyz")
    assert missing.returncode == 127
    assert json_lines(missing.stderr)[-1] == {
        "time": json_lines(missing.stderr)[-1]["time"],
        "event": "error",
        "reason": "command not found: no-such-command-xyz",
        "exit_code": 127,
    }

    proc = start("-o", "json", "-t", "60", f"tcp://127.0.0.1:{free_port()}")
    assert proc.stderr is not None
    proc.stderr.readline()  # the begin event: the wait has begun
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 143
    last = json_lines(proc.stderr.read())[-1]
    assert (last["event"], last["exit_code"]) == ("error", 143)
    assert "interrupted by SIGTERM" in last["reason"]


def test_ready_target_runs_the_command_with_its_exit_code() -> None:
    port = free_port()
    with tcp_listener(port):
        result = waitfor(f"tcp://127.0.0.1:{port}", "--", "sh", "-c", "echo from-command; exit 7")
    assert result.returncode == 7
    assert result.stdout == "from-command\n"


def test_command_is_not_run_after_timeout(closed_port: int, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = waitfor("-t", "0.5", f"tcp://127.0.0.1:{closed_port}", "--", "touch", str(marker))
    assert result.returncode == 124
    assert not marker.exists()
    assert f"tcp://127.0.0.1:{closed_port} still not ready after" in result.stderr
    assert "connection refused" in result.stderr


def test_missing_command_is_127() -> None:
    port = free_port()
    with tcp_listener(port):
        result = waitfor(f"tcp://127.0.0.1:{port}", "--", "no-such-command-xyz")
    assert result.returncode == 127
    assert (
        result.stderr.splitlines()[-1] == "waitfor: error: command not found: no-such-command-xyz"
    )


def test_timeout_exit_124_in_about_the_timeout(closed_port: int) -> None:
    started = time.monotonic()
    result = waitfor("--timeout", "1", f"tcp://127.0.0.1:{closed_port}")
    elapsed = time.monotonic() - started
    assert result.returncode == 124
    assert 1.0 <= elapsed < 4.0  # includes interpreter start-up on a busy machine


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_signals_cancel_the_wait(closed_port: int, sig: signal.Signals, code: int) -> None:
    proc = start("-t", "60", f"tcp://127.0.0.1:{closed_port}")
    assert proc.stderr is not None
    proc.stderr.readline()  # "waiting for ..." once the wait has begun
    sent = time.monotonic()
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == code
    assert time.monotonic() - sent < 1.0
    assert f"interrupted by {sig.name}" in proc.stderr.read()


def test_a_hangup_before_the_command_ends_the_wait_and_the_command_never_runs(
    closed_port: int, tmp_path: Path
) -> None:
    """A closed terminal or SSH session (SIGHUP) ends the wait as SIGTERM does: one line, 129."""
    marker = tmp_path / "ran"
    proc = start("-t", "60", f"tcp://127.0.0.1:{closed_port}", "--", "touch", str(marker))
    assert proc.stderr is not None
    proc.stderr.readline()  # "waiting for ...": the wait has begun
    proc.send_signal(signal.SIGHUP)
    assert proc.wait(timeout=10) == 129
    assert proc.stderr.read().splitlines()[-1] == "waitfor: error: interrupted by SIGHUP"
    assert not marker.exists()


@pytest.mark.parametrize("ignored", [signal.SIGHUP, signal.SIGINT], ids=["nohup", "background"])
def test_an_interrupt_ignored_at_start_stays_ignored_in_waitfor_and_its_command(
    ignored: signal.Signals,
) -> None:
    """An ignored SIGHUP (nohup) or SIGINT (a job a script started in the background, which
    the script's Ctrl-C must not end) is the user's wish: the wait goes on through one, and the
    command is started with it still ignored (its own state said by /proc). A SIGINT used to
    be ignored only until waitfor's handlers were in place, then taken over."""
    port = free_port()
    command = ("sh", "-c", 'grep "^SigIgn" /proc/self/status')
    waiting = (sys.executable, "-m", "waitfor", "-t", "60", f"tcp://127.0.0.1:{port}")
    trap = f'trap "" {ignored.name.removeprefix("SIG")}; exec "$@"'
    proc = subprocess.Popen(
        ["sh", "-c", trap, "sh", *waiting, "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        proc.stderr.readline()  # the wait has begun
        proc.send_signal(ignored)
        time.sleep(0.3)
        assert proc.poll() is None  # still waiting
        with tcp_listener(port):
            out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0, err
    assert int(out.split()[1], 16) >> (ignored - 1) & 1  # ignored in the command too


def test_json_output_has_one_object_per_line(closed_port: int) -> None:
    result = waitfor("-o", "json", "-t", "0.4", f"tcp://127.0.0.1:{closed_port}")
    assert result.returncode == 124
    records = [json.loads(line) for line in result.stderr.splitlines()]
    events = [r["event"] for r in records]
    assert events[0] == "begin"
    assert events[-3:] == ["timed_out", "summary", "exit"]  # changes only: no line an attempt
    assert {"not_ready", "timed_out", "summary"} <= set(events)
    assert "attempt" not in events
    assert records[-2]["reason"] == f"127.0.0.1:{closed_port} connection refused"
    assert records[-1]["exit_code"] == 124


def test_quiet_says_only_why_it_failed(closed_port: int) -> None:
    port = free_port()
    with tcp_listener(port):
        assert waitfor("-q", f"tcp://127.0.0.1:{port}").stderr == ""
    result = waitfor("-q", "-t", "0.3", f"tcp://127.0.0.1:{closed_port}")
    assert result.returncode == 124
    assert result.stderr.count("\n") == 1
    assert "connection refused" in result.stderr


def test_text_output_says_what_and_why_without_flooding(closed_port: int) -> None:
    with http_server(Script(status=503)) as (url, _):
        result = waitfor("-o", "text", "-t", "2", f"tcp://127.0.0.1:{closed_port}", url)
    lines = result.stderr.splitlines()
    assert lines[:3] == [
        "waitfor: waiting for 2 targets (timeout 2s):",
        f"waitfor:   tcp://127.0.0.1:{closed_port}",
        f"waitfor:   {url}",
    ]
    assert f"waitfor: {url} not ready: HTTP 503 (expecting 200-399)" in lines
    assert len(lines) == 7  # header and targets, one line per target on change, one summary each


def test_the_start_line_lists_targets_as_the_summary_does(closed_port: int) -> None:
    """A target may hold ", " or any separator (#status=200,204): one per line, as at the end."""
    targets = [f"http://127.0.0.1:{closed_port}/a#status=200,204", "exec:sh -c 'exit 1, 2'"]
    result = waitfor("-o", "text", "-t", "0.5", *targets)
    lines = result.stderr.splitlines()
    assert lines[0] == "waitfor: waiting for 2 targets (timeout 0.5s):"
    listed = [line.removeprefix("waitfor:   ") for line in lines[1:3]]
    summarised = [
        line.removeprefix("waitfor: ").partition(" still not ready")[0] for line in lines[-2:]
    ]
    assert listed == summarised == [targets[0], targets[1]]


@pytest.mark.parametrize("mode", ["text", "quiet"])
def test_a_permanent_failure_is_said_once(mode: str, tmp_path: Path) -> None:
    with banner_server(b"S") as port:  # agrees to TLS: now the root certificate is needed
        target = f"postgresql://127.0.0.1:{port}/x?sslmode=verify-full&sslrootcert={tmp_path}/none"
        result = waitfor("-o", mode, "-t", "5", target)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "root certificate file" in line]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"waitfor: error: postgresql://127.0.0.1:{port}/x")


def test_help_documents_every_option() -> None:
    result = waitfor("--help")
    assert result.returncode == 0
    for option in (
        "--timeout",
        "--attempt-timeout",
        "--max-interval",
        "--invert",
        "--stable",
        "--any",
        "--cert",
        "--key-password",
        "--output",
        "--quiet",
        "--insecure",
        "--cacert",
        "WAITFOR_TARGETS",
        "Examples:",
    ):
        assert option in result.stdout


@pytest.mark.parametrize(("columns", "widest"), [("80", 80), ("60", 80), ("200", 100)])
def test_help_fits_the_terminal(columns: str, widest: int) -> None:
    """Wrapped to the terminal's width (the targets' rows too), never over 100 columns."""
    result = waitfor("--help", env={"COLUMNS": columns})
    assert result.returncode == 0
    too_wide = [line for line in result.stdout.splitlines() if len(line) > widest]
    assert too_wide == []


def test_dash_h_is_help_and_the_help_is_complete() -> None:
    result = waitfor("-h")
    assert result.returncode == 0, result.stderr
    assert result.stdout == waitfor("--help").stdout
    output = result.stdout[result.stdout.index("--output") : result.stdout.index("-q, --quiet")]
    assert "quiet" in " ".join(output.split())  # every choice explained
    assert "\u2026" not in result.stdout  # one spelling of the ellipsis: "..."
    for scheme in ("tcp://", "http+unix://", "amqp://", "exec:", "{namespace}"):
        assert f"\n    {scheme}" in result.stdout  # a row of its own


@pytest.mark.parametrize(
    ("variable", "value"),
    [("WAITFOR_TIMEOUT", "bogus"), ("WAITFOR_OUTPUT", "loud"), ("WAITFOR_MAX_INTERVAL", "x")],
)
def test_a_bad_environment_variable_is_named(variable: str, value: str) -> None:
    result = waitfor("tcp://127.0.0.1:1", env={variable: value})
    assert result.returncode == 2
    assert result.stderr.startswith(f"waitfor: error: Invalid value for {variable}: ")
    assert len(result.stderr.splitlines()) == 1


def test_a_bad_option_is_still_named_as_an_option() -> None:
    result = waitfor("-t", "bogus", "tcp://127.0.0.1:1")
    assert result.returncode == 2
    assert "Invalid value for '-t' / '--timeout'" in result.stderr


def test_a_signal_wrapped_by_class_creation_is_still_a_signal() -> None:
    """A signal landing in a ``__set_name__`` (while a module defines a class) reaches us as a
    RuntimeError caused by it (seen: platform.uname_result's cached_property, SIGINT at 10 ms)."""
    import signal

    from waitfor.cli.signals import Signalled, signalled_in

    class Landing:
        def __set_name__(self, owner: type, name: str) -> None:
            raise Signalled(signal.SIGINT)

    with pytest.raises(RuntimeError) as info:
        type("Defined", (), {"field": Landing()})
    found = signalled_in(info.value)
    assert found is not None
    assert found.signum == signal.SIGINT
    assert signalled_in(RuntimeError("unrelated")) is None


QUICK_WORDS = [
    ["tcp://db:5432"],
    ["tcp://a:1", "http://b/", "dns:c"],
    ["-q", "tcp://a:1"],
    ["tcp://a:1", "--quiet"],
    ["-t", "2m", "tcp://a:1"],
    ["tcp://a:1", "--timeout", "90", "-q"],
    ["-t", "0", "tcp://a:1"],
    ["tcp://a:1", "--", "./app", "--port", "80", "-q"],
    ["tcp://a:1", "--", "--"],
    ["", "tcp://a:1"],
    ["tcp://a:1", "-t", "1h30m"],
    ["--timeout=5m", "tcp://a:1", "http://b/"],
]
CLICK_WORDS = [
    [],
    ["--", "./app"],
    ["-q"],
    ["-o", "json", "tcp://a:1"],
    ["--timeout=", "tcp://a:1"],
    ["--timeout=-5", "tcp://a:1"],
    ["-t=5m", "tcp://a:1"],
    ["--quiet=1", "tcp://a:1"],
    ["--timeout=5m", "-t", "5m", "tcp://a:1"],
    ["-t5m", "tcp://a:1"],
    ["-t", "soon", "tcp://a:1"],
    ["-t", "-5", "tcp://a:1"],
    ["tcp://a:1", "-t"],
    ["-q", "-q", "tcp://a:1"],
    ["-t", "1", "-t", "2", "tcp://a:1"],
    ["-", "tcp://a:1"],
    ["--quie", "tcp://a:1"],
    ["-qt", "5", "tcp://a:1"],
    ["--help"],
    ["tcp://a:1", "--", ""],
    ["--invert", "tcp://a:1"],
]


def click_params(words: list[str]) -> dict[str, Any]:
    from waitfor.cli import clickparse as clickcli

    context = clickcli.cli.make_context("waitfor", list(words), auto_envvar_prefix="WAITFOR")
    return {**context.params, "command": context.meta.get(clickcli.COMMAND_KEY, [])}


@pytest.mark.parametrize("words", QUICK_WORDS, ids=" ".join)
def test_the_quick_reading_gives_clicks_parameters(
    words: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [n for n in os.environ if "WAITFOR_" in n]:
        monkeypatch.delenv(name)
    quick = cli.quick_params(words, os.environ)
    assert quick is not None, "the plainest command lines need no click"
    assert quick == click_params(words)


@pytest.mark.parametrize("words", CLICK_WORDS, ids=" ".join)
def test_every_other_command_line_is_clicks(words: list[str]) -> None:
    assert cli.quick_params(words, {}) is None


#: words near the quick reading's edges: its options misspelt, glued, repeated, valueless
EDGE_WORDS = [
    *["-", "--", "---", "-t", "-q", "--quiet", "--timeout", "--timeout=", "--timeout=5m", "-t5"],
    *["-qt", "-tq", "--time", "--quiet=1", "-t=5", "-h", "-o", "\u2014t", "-\udcff", "\udcff"],
    *["5", "5m", "0", "-5", "1e400", "nan", "inf", "1h30m", " 5", "", "tcp://a:1", "dns:b"],
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(EDGE_WORDS), st.text(max_size=4)), max_size=7))
def test_whatever_the_quick_reading_takes_click_reads_the_same(words: list[str]) -> None:
    quick = cli.quick_params(words, {})
    if quick is not None:
        with pytest.MonkeyPatch.context() as monkeypatch:  # click reads no variable either
            for name in [n for n in os.environ if "WAITFOR_" in n]:
                monkeypatch.delenv(name)
            assert quick == click_params(words)  # and click does not call it a usage error
        assert quick["targets"]
        assert not quick["command"] or quick["command"][0]


@pytest.mark.parametrize(
    "variable",
    ["WAITFOR_TARGETS", "WAITFOR_TIMEOUT", "WAITFOR_QUIET", "WAITFOR_ANY", "_WAITFOR_COMPLETE"],
)
def test_any_waitfor_variable_sends_the_words_to_click(variable: str) -> None:
    assert cli.quick_params(["tcp://a:1"], {"PATH": "/bin"}) is not None
    assert cli.quick_params(["tcp://a:1"], {variable: "x"}) is None


@pytest.mark.parametrize(
    ("words", "clicked"),
    [(["-q", "-t", "5s"], False), (["-q", "-o", "json"], True), (["--quiet", "-t5s"], True)],
)
def test_a_ready_run_imports_click_only_for_other_options(
    words: list[str], clicked: bool, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if "WAITFOR_" not in k}
    port = free_port()
    with tcp_listener(port):
        result, modules = run_listing_imports(tmp_path, *words, f"tcp://127.0.0.1:{port}", env=env)
    assert result.returncode == 0, result.stderr
    assert ("click" in modules) is clicked
    assert "inspect" not in modules or clicked


class Raising(Passed):
    """A wait that ends in what click calls an Abort (a KeyboardInterrupt someone raised; an
    EOFError, which click takes for the terminal's end of input)."""

    def __init__(self, error: type[BaseException]) -> None:
        super().__init__()
        self.error = error

    def run_sync(self, guard: object = None) -> list[object]:
        raise self.error()


@pytest.mark.parametrize("words", [["tcp://a:1"], ["-o", "text", "tcp://a:1"]], ids=" ".join)
def test_an_aborted_wait_is_one_line_whichever_read_the_words(
    words: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # click echoed an empty line before its Abort; the quick reading did not
    monkeypatch.setattr(api, "Wait", lambda *targets, **kwargs: Raising(KeyboardInterrupt))
    assert run_cli(words, monkeypatch) == 130
    assert capsys.readouterr().err == "waitfor: error: interrupted by SIGINT\n"


@pytest.mark.parametrize("words", [["tcp://a:1"], ["-o", "text", "tcp://a:1"]], ids=" ".join)
def test_an_eof_error_is_not_an_interrupt_whichever_read_the_words(
    words: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """waitfor reads no terminal: an EOFError out of the wait is a library's end of stream that
    a check let through (dnspython's, from a closed TCP connection, was "interrupted by
    SIGINT", exit 130), a bug that propagates as bugs do, never an interrupt."""
    monkeypatch.setattr(api, "Wait", lambda *targets, **kwargs: Raising(EOFError))
    for name in [n for n in os.environ if n.startswith("WAITFOR_")]:
        monkeypatch.delenv(name)
    with pytest.raises(RuntimeError, match="EOFError escaped a check"):
        cli.main(words)


#: the quick reading's words, and click's
READINGS = [[], ["-o", "text"]]


@pytest.mark.parametrize("reading", READINGS, ids=["quick", "click"])
@pytest.mark.parametrize(
    ("variable", "known"),
    [
        ("WAITFOR_TIMOUT", "WAITFOR_TIMEOUT"),
        ("WAITFOR_TARGET", "WAITFOR_TARGETS"),
        ("WAITFOR_KEYPASSWORD", "WAITFOR_KEY_PASSWORD"),
        ("WAITFOR_VERSION", None),  # click's --version read it: exit 0 without waiting
        ("WAITFOR_XYZZY", None),
    ],
)
def test_an_unknown_variable_is_named_in_one_warning_and_ignored(
    reading: list[str], variable: str, known: str | None
) -> None:
    env = {k: v for k, v in os.environ.items() if "WAITFOR_" not in k}
    port = free_port()
    with tcp_listener(port):
        result = subprocess.run(
            [sys.executable, "-m", "waitfor", *reading, f"tcp://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
            env={**env, variable: "tcp://u:hunter2@db:1"},  # the value may be a secret
        )
    assert result.returncode == 0, result.stderr
    hint = f" (did you mean {known}?)" if known else ""
    lines = result.stderr.splitlines()
    assert f"waitfor: unknown variable {variable} ignored{hint}" in lines, result.stderr
    assert len([line for line in lines if variable in line]) == 1
    assert "hunter2" not in result.stderr
    assert "ready after" in result.stderr  # it waited


def test_an_unknown_variable_warns_in_json_with_json_output() -> None:
    port = free_port()
    with tcp_listener(port):
        result = waitfor(
            "-o", "json", f"tcp://127.0.0.1:{port}", env={"WAITFOR_TIMOUT": "1s"}, clean=True
        )
    assert result.returncode == 0, result.stderr
    notes = [r for r in json_lines(result.stderr) if r["event"] == "note"]
    assert [n["message"] for n in notes] == [
        "unknown variable WAITFOR_TIMOUT ignored (did you mean WAITFOR_TIMEOUT?)"
    ]


def test_the_known_variables_are_those_click_reads() -> None:
    import click

    from waitfor.cli import clickparse as clickcli

    read = set()
    for param in clickcli.cli.params:
        if isinstance(param, click.Option) and not param.allow_from_autoenv:
            assert param.envvar is None, param.name
            continue
        assert param.name is not None
        read.add(param.envvar or f"WAITFOR_{param.name.upper()}")
    assert read == reading.VARIABLES


def test_an_unknown_variable_leaves_the_words_to_the_quick_reading() -> None:
    assert cli.quick_params(["tcp://a:1"], {"WAITFOR_TIMOUT": "1s"}) is not None


def test_the_client_certificate_options_take_a_file() -> None:
    """--help calls them what docs/cli.md does: FILE, as --cacert."""
    result = waitfor("--help")
    assert result.returncode == 0
    assert "--cert FILE" in result.stdout
    assert "--key FILE" in result.stdout


@pytest.mark.parametrize(
    ("target", "unknown", "known"),
    [
        ("http://api#bogus=1", "'bogus'", ["client-key", "expect-header", "key-password"]),
        ("http://api#expect_headr=X", "'expect-headr'", ["expect-header"]),
        ("mysql://db#min_tabel=x", "'min-tabel'", ["table"]),
    ],
)
def test_an_unknown_option_lists_the_options_as_documented(
    target: str, unknown: str, known: list[str]
) -> None:
    result = waitfor(target)
    assert result.returncode == 2
    assert f"unknown option {unknown} (known: " in result.stderr, result.stderr
    listed = result.stderr.partition("(known: ")[2]
    for name in known:
        assert name in listed
    assert "_" not in listed, listed


@pytest.mark.parametrize("variable", ["WAITFOR_INVERT", "WAITFOR_ANY", "WAITFOR_INSECURE"])
def test_a_bad_flag_variable_lists_the_accepted_values_cleanly(variable: str) -> None:
    result = waitfor("tcp://127.0.0.1:1", env={variable: "bogus"})
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line == (
        f"waitfor: error: Invalid value for {variable}: 'bogus' is not true or false"
        " (yes/no, on/off, 1/0, t/f, y/n)"
    )


@pytest.mark.parametrize("kind", ["ready", "timed_out", "bad_target", "exec"])
def test_every_json_run_ends_with_its_exit_code(kind: str) -> None:
    """The last JSON line always carries the exit code: the ``exit`` event after a timeout or
    readiness and before exec, the ``error`` event after bad input; and a down target writes
    changes and progress, not a line per attempt."""
    down = [f"tcp://127.0.0.1:{free_port()}" for _ in range(3)]
    port = free_port()
    with tcp_listener(port):
        args = {
            "ready": [f"tcp://127.0.0.1:{port}"],
            "timed_out": ["-t", "3", *down],
            "bad_target": ["nosuch://x"],
            "exec": [f"tcp://127.0.0.1:{port}", "--", "true"],
        }[kind]
        result = waitfor("-o", "json", "--max-interval", "0.05", *args)
    records = json_lines(result.stderr)
    code = {"ready": 0, "timed_out": 124, "bad_target": 2, "exec": 0}[kind]
    assert result.returncode == code, result.stderr
    last = records[-1]
    ending = "error" if kind == "bad_target" else "exit"
    assert (last["event"], last["exit_code"]) == (ending, code), last
    assert [r["event"] for r in records].count(ending) == 1
    if kind == "exec":
        assert (last["outcome"], last["command"]) == ("exec", "true")
    if kind == "timed_out":  # about 60 attempts per target: not 360 lines
        events = [r["event"] for r in records]
        assert "attempt" not in events
        assert events.count("not_ready") <= 3 * 3, events
        assert events.count("timed_out") == 3
        assert events.count("summary") == 3
