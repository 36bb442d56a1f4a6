from __future__ import annotations

import contextlib
import io
import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from tests.support.command import waitfor
from tests.support.ports import free_port
from waitfor import api
from waitfor.cli.report import JsonReporter, LiveReporter, Reporter, TextReporter, make_reporter
from waitfor.core.runner import Event, EventType, TargetResult
from waitfor.core.targets import Target, parse_target

DB = parse_target("tcp://db:5432")
API = parse_target("http://admin:hunter2@api/healthz")


@pytest.fixture
def closed_port() -> int:
    return free_port()


def event(
    kind: EventType, elapsed: float, reason: str = "", target: object = DB, n: int = 1
) -> Event:
    return Event(kind, target, n, elapsed, reason)  # type: ignore[arg-type]


def feed(reporter: Reporter) -> str:
    reporter.begin([DB, API], 60)
    for second in range(25):  # 25 s of "connection refused", two attempts a second
        reporter(event(EventType.NOT_READY, second, "connection refused", n=2 * second + 1))
        reporter(event(EventType.NOT_READY, second + 0.5, "connection refused", n=2 * second + 2))
    reporter(event(EventType.NOT_READY, 25.2, "HTTP 503 (expecting 200-399)", API))
    reporter(event(EventType.READY, 26, "connected to 10.0.0.1:5432", n=53))
    reporter.finish(
        [
            TargetResult(DB, True, 53, 26.0, "connected to 10.0.0.1:5432"),
            TargetResult(API, False, 1, 30.0, "HTTP 503 (expecting 200-399)"),
        ]
    )
    assert isinstance(reporter.stream, io.StringIO)
    return reporter.stream.getvalue()


def test_text_says_what_and_why_without_flooding() -> None:
    lines = feed(TextReporter(io.StringIO())).splitlines()
    assert lines == [
        "waitfor: waiting for 2 targets (timeout 60s):",
        "waitfor:   tcp://db:5432",
        "waitfor:   http://admin:***@api/healthz",
        "waitfor: tcp://db:5432 not ready: connection refused",
        # one line for all the targets still awaited; the next 20 s later (then 40 s, 60 s)
        "waitfor: still waiting for 2 of 2 targets (10s): tcp://db:5432: connection refused; "
        "and 1 more",
        "waitfor: http://admin:***@api/healthz not ready: HTTP 503 (expecting 200-399)",
        "waitfor: tcp://db:5432 is ready: connected to 10.0.0.1:5432",
        "waitfor: tcp://db:5432 ready after 26.00s (53 attempts)",
        "waitfor: http://admin:***@api/healthz still not ready after 30.00s (1 attempt): "
        "HTTP 503 (expecting 200-399)",
    ]


def test_live_view_redraws_one_line_per_target() -> None:
    out = feed(LiveReporter(io.StringIO()))
    assert "\x1b[2F\x1b[J" in out  # moves up over the two status lines and redraws them
    assert "+ tcp://db:5432: ready after 26.00s: connected to 10.0.0.1:5432" in out
    assert out.endswith(
        "waitfor: http://admin:***@api/healthz still not ready after 30.00s (1 attempt): "
        "HTTP 503 (expecting 200-399)\n"
    )
    assert "hunter2" not in out


def test_json_is_one_object_per_event() -> None:
    records = [json.loads(line) for line in feed(JsonReporter(io.StringIO())).splitlines()]
    assert records[0]["event"] == "begin"
    assert records[0]["targets"] == ["tcp://db:5432", "http://admin:***@api/healthz"]
    # changes, not attempts: each target's first reason, one progress line for both at 10 s
    assert [r["event"] for r in records[1:-2]] == ["not_ready", "progress", "not_ready", "ready"]
    assert records[2] == {
        "time": records[2]["time"],
        "event": "progress",
        "elapsed": 10.0,
        "waiting": 2,
        "total": 2,
        "shown": [{"target": "tcp://db:5432", "attempt": 21, "reason": "connection refused"}],
        "more": 1,
    }
    assert records[-1] == {
        "time": records[-1]["time"],
        "event": "summary",
        "target": "http://admin:***@api/healthz",
        "ready": False,
        "state": "not_ready",
        "attempts": 1,
        "elapsed": 30.0,
        "reason": "HTTP 503 (expecting 200-399)",
    }


@pytest.mark.parametrize("output", ["text", "tty", "json"])
def test_an_inverted_wait_says_down_not_ready(output: str, closed_port: int) -> None:
    """--invert, end to end: "is down", "down after", and json's state; never "is ready (down)"."""
    target = f"tcp://127.0.0.1:{closed_port}"
    result = waitfor("--invert", "-o", output, target, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "ready" not in result.stderr.replace('"ready"', "")  # json's stable field names
    if output == "json":
        records = [json.loads(line) for line in result.stderr.splitlines()]
        ready, summary, end = records[-3:]
        assert (end["event"], end["exit_code"]) == ("exit", 0)
        assert (ready["event"], ready["state"]) == ("ready", "down")
        assert (summary["event"], summary["ready"], summary["state"]) == ("summary", True, "down")
        assert summary["reason"] == f"127.0.0.1:{closed_port} connection refused"
        return
    if output == "text":
        assert f"waitfor: {target} is down: 127.0.0.1:{closed_port} connection refused\n" in (
            result.stderr
        )
    else:
        assert f"+ {target}: down after " in result.stderr
    assert f"waitfor: {target} down after " in result.stderr.splitlines()[-1]


def test_an_inverted_wait_that_timed_out_says_not_down() -> None:
    stream = io.StringIO()
    reporter = make_reporter("quiet", stream)
    reporter.invert = True
    reporter(event(EventType.TIMED_OUT, 2, "still up, connected"))
    assert stream.getvalue() == (
        "waitfor: tcp://db:5432 not down after 2.00s (1 attempt): still up, connected\n"
    )


def nesting(line: str) -> int:
    depth = deepest = 0
    for char in line:
        depth += {"(": 1, ")": -1}.get(char, 0)
        deepest = max(deepest, depth)
    return deepest


@pytest.mark.parametrize("output", ["text", "tty", "quiet"])
@pytest.mark.parametrize("invert", [False, True])
def test_a_reason_is_never_wrapped_in_parentheses(output: str, invert: bool) -> None:
    """Reasons hold parentheses of their own (HTTP 503 (expecting 200-399), accepting
    connections (MySQL protocol 10, ...)): the report puts them after a colon, never inside."""
    stream = io.StringIO()
    reporter = make_reporter(output, stream)
    reporter.invert = invert
    reporter.begin([DB], 60)
    for second in range(0, 30, 10):
        reporter(event(EventType.NOT_READY, second, "HTTP 503 (expecting 200-399)", n=second + 1))
    reporter(event(EventType.READY, 31, "accepting connections (MySQL protocol 10)", n=32))
    reporter(event(EventType.TIMED_OUT, 32, "still up, server is up (it requires a password)"))
    reporter.finish([TargetResult(DB, True, 32, 31.0, "accepting connections (MySQL protocol 10)")])
    lines = stream.getvalue().replace("\r", "\n").splitlines()
    assert lines
    assert [line for line in lines if nesting(line) > 1] == []


def test_quiet_says_only_why_it_failed() -> None:
    stream = io.StringIO()
    reporter = make_reporter("quiet", stream)
    feed_quiet = [
        event(EventType.NOT_READY, 1, "refused"),
        event(EventType.TIMED_OUT, 2, "refused"),
    ]
    for e in feed_quiet:
        reporter(e)
    assert (
        stream.getvalue()
        == "waitfor: tcp://db:5432 still not ready after 2.00s (1 attempt): refused\n"
    )


def test_auto_picks_text_off_a_terminal() -> None:
    assert type(make_reporter("auto", io.StringIO())) is TextReporter


def test_a_reason_changing_at_every_attempt_is_rate_limited() -> None:
    stream = io.StringIO()
    reporter = TextReporter(stream)
    for n in range(50):  # five seconds of a counter, ten attempts a second
        reporter(event(EventType.NOT_READY, n / 10, f"count {n}", n=n + 1))
    reporter.finish([TargetResult(DB, False, 50, 5.0, "count 49")])
    assert stream.getvalue().splitlines() == [
        "waitfor: tcp://db:5432 not ready: count 0",  # the first reason, at once
        "waitfor: tcp://db:5432 not ready: count 20",  # 2 s later; the next gap is 4 s
        "waitfor: tcp://db:5432 still not ready after 5.00s (50 attempts): count 49",
    ]


def test_an_exec_target_whose_output_changes_prints_no_line_per_attempt() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "waitfor",
            "--max-interval",
            "0.1",
            "-t",
            "3",
            "exec:sh -c 'date +%s%N; exit 1'",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 124, result.stderr
    lines = result.stderr.splitlines()
    not_ready = [line for line in lines if " not ready: exit 1: " in line]
    attempts = int(lines[-1].split("(")[1].split(" attempt")[0])
    assert attempts >= 6, lines  # a line per attempt would be that many
    assert 1 <= len(not_ready) <= 3, lines


def test_a_note_in_every_output() -> None:
    text = TextReporter(io.StringIO())
    text.note("no Events: forbidden")
    assert text.stream.getvalue() == "waitfor: no Events: forbidden\n"  # type: ignore[attr-defined]
    as_json = JsonReporter(io.StringIO())
    as_json.note("no Events: forbidden")
    record = json.loads(as_json.stream.getvalue())  # type: ignore[attr-defined]
    assert (record["event"], record["message"]) == ("note", "no Events: forbidden")
    live = LiveReporter(io.StringIO())
    live.begin([DB], 60)
    live.note("no Events: forbidden")
    drawn = live.stream.getvalue()  # type: ignore[attr-defined]
    # said above the status rows, which are drawn again below it
    assert drawn.index("waitfor: no Events: forbidden\n") < drawn.rindex("tcp://db:5432: starting")


def test_tee_passes_everything_on() -> None:
    from waitfor.cli.report import Tee

    first, second = TextReporter(io.StringIO()), JsonReporter(io.StringIO())
    tee = Tee(first, second)
    assert feed(tee) == first.stream.getvalue()  # type: ignore[attr-defined]
    assert len(second.stream.getvalue().splitlines()) == 1 + 2 + 1 + 1 + 2  # type: ignore[attr-defined]
    tee.note("once")
    assert first.stream.getvalue().endswith("waitfor: once\n")  # type: ignore[attr-defined]
    assert "once" not in second.stream.getvalue()  # type: ignore[attr-defined]


def test_one_attempt_is_one_attempt_in_every_view() -> None:
    live = LiveReporter(io.StringIO())
    live.begin([DB], 60)
    live(event(EventType.TIMED_OUT, 0.1, "connection refused", n=1))  # drawn at once
    live(event(EventType.TIMED_OUT, 0.7, "connection refused", n=2))
    live.finish([TargetResult(DB, False, 1, 1.0, "connection refused")])
    assert isinstance(live.stream, io.StringIO)
    shown = live.stream.getvalue()
    assert "(1 attempt, 0.1s)" in shown
    assert "(2 attempts, 0.7s)" in shown
    assert "(1 attempts" not in shown


# --- a forgotten init container: a day of down targets must not cost a day of logs --------

DAY = 86_400.0
DAILY_LIMIT = 2_000_000  # bytes a day per process, whatever the number of targets
#: (targets, seconds between one target's attempts): the backoff's cap for one, slower for many
#: (attempts cut off by a timeout) so that a simulated day takes seconds, not hours; with 20
#: and 200 targets every attempt may be told (the gaps of a target's lines end at a minute):
#: only the process's budget holds them
FLEETS = [(1, 0.6), (20, 10.0), (200, 100.0)]
MODES = ("text", "tty", "json", "library")


class ByteCounter(io.StringIO):
    """A stream that counts what is written (UTF-8 bytes, lines) and keeps only the tail."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.lines = 0
        self.tail: list[str] = []

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        self.lines += text.count("\n")
        self.tail = [*self.tail[-20:], text]
        return len(text)


def fleet(count: int) -> list[Target]:
    return [parse_target(f"tcp://db-{i}.example:{5000 + i}") for i in range(count)]


def a_day_down(
    tell: Callable[[Event], None], targets: list[Target], every: float, span: float = DAY
) -> None:
    """Every target down for ``span`` seconds, its reason changing at every attempt (a counter,
    a moving address, a clock in a command's output), the targets' attempts spread evenly."""
    step = every / len(targets)
    for n in range(int(span / step)):
        target = targets[n % len(targets)]
        attempt = n // len(targets) + 1
        # a counter, and words that change too (a nonce): both paces of a changed reason
        reason = f"10.0.{n % 250}.7:5432 connection refused (try {attempt}, nonce {n:x})"
        tell(Event(EventType.NOT_READY, target, attempt, n * step, reason))


@contextlib.contextmanager
def library_log(stream: io.StringIO, level: str = "INFO") -> Iterator[None]:
    """The ``waitfor`` logger written as logging.basicConfig(level=INFO) writes it."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logger = logging.getLogger("waitfor")
    saved = logger.level
    logger.addHandler(handler)
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)


def a_day_in_every_mode(count: int, every: float, span: float = DAY) -> dict[str, ByteCounter]:
    targets = fleet(count)
    streams = {mode: ByteCounter() for mode in MODES}
    reporters = [make_reporter(mode, streams[mode]) for mode in MODES[:3]]
    for reporter in reporters:
        reporter.begin(targets, None)
    with library_log(streams["library"]):
        log = api._logger(targets)
        assert log is not None
        tellers: list[Callable[[Event], None]] = [*reporters, log]

        def tell(event: Event) -> None:
            for teller in tellers:
                teller(event)
            if any(s.bytes > 2 * DAILY_LIMIT for s in streams.values()):
                raise OverflowError(f"{ {m: s.bytes for m, s in streams.items()} } at {event}")

        a_day_down(tell, targets, every, span)
    return streams


@pytest.mark.parametrize(("count", "every"), FLEETS)
def test_a_day_of_down_targets_costs_at_most_2_mb_in_every_mode(count: int, every: float) -> None:
    """A forgotten init container: a day of targets down, their reasons changing at every
    attempt, writes at most 2 MB in every mode (text, live view, JSON lines, the library's
    logger), and still a line a minute or so."""
    streams = a_day_in_every_mode(count, every)
    for mode, stream in streams.items():
        assert stream.bytes <= DAILY_LIMIT, (mode, stream.bytes, stream.tail[-3:])
        assert stream.lines > 24 * 60 // 2, (mode, "a sign of life every minute or two")
