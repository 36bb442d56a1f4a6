"""Turn runner events into what people (text, live TTY view) or programs (JSON lines) read.

No output floods, however long the wait and however many its targets: :mod:`waitfor.core.pacing`
decides which changes are told and when one progress line for all the targets still awaited is
due (at most about 2 MB a day); then a summary line per target at the end. Everything goes to
the given stream (stderr from the CLI); targets print in redacted form only.
A reason always comes last, after a colon, never in parentheses: it may hold its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from waitfor.base.bucket import TokenBucket
from waitfor.core.events import Event, EventType, TargetResult
from waitfor.core.pacing import (
    DAY,
    ENTRY_CHARS,
    PROGRESS_BYTES,
    Pacer,
    Progress,
    cut,
    progress_text,
)
from waitfor.core.pacing import attempts as _attempts
from waitfor.core.targets import Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

OUTPUTS = ("auto", "text", "tty", "json", "quiet")


class Reporter:
    """The quiet reporter, and the interface of the others: says only why a wait timed out.

    A permanent failure (FAILED) ends the wait with an exception whose message the caller shows,
    so the human reporters do not repeat it.
    """

    #: the wait is for "down" (set by the wait before :meth:`begin`): the words say "down"
    invert = False

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        pass

    def __call__(self, event: Event) -> None:
        if event.type is EventType.TIMED_OUT:
            self._line(
                self._final_line(event.target, False, event.elapsed, event.attempt, event.reason)
            )

    def finish(self, results: Sequence[TargetResult]) -> None:
        pass

    def note(self, text: str) -> None:
        """Something the user should know that is not about a target (said once)."""
        self._line(text)

    def _line(self, text: str) -> None:
        self.stream.write(f"waitfor: {text}\n")
        self.stream.flush()

    def _final_line(
        self,
        target: Target,
        ready: bool,
        elapsed: float,
        attempts: int,
        reason: str,
        cancelled: bool = False,
    ) -> str:
        tries = _attempts(attempts)
        if ready:
            return f"{target} {self._state(True)} after {elapsed:.2f}s ({tries})"
        if cancelled:  # --any: not given up on, no longer needed
            cancelled_after = f"cancelled after {elapsed:.2f}s ({tries})"
            return f"{target} {cancelled_after}, another target was ready first: {reason}"
        state = "not down" if self.invert else "still not ready"
        return f"{target} {state} after {elapsed:.2f}s ({tries}): {reason}"

    def _state(self, ready: bool) -> str:
        """The target's state in a word: ready / not_ready, or inverted down / up."""
        if self.invert:
            return "down" if ready else "up"
        return "ready" if ready else "not_ready"


class TextReporter(Reporter):
    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.pacer = Pacer()

    #: several targets are listed one per line under the first (the live view's rows name them)
    LISTS_TARGETS = True

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        self.pacer.begin(targets)
        limit = "no timeout" if timeout is None else f"timeout {timeout:g}s"
        if len(targets) == 1:
            self._line(f"waiting for {targets[0]} ({limit})")
            return
        # one per line, as in the summary: any separator may be part of a target (#status=200,204)
        if not self.LISTS_TARGETS:
            self._line(f"waiting for {len(targets)} targets ({limit})")
            return
        self._line(f"waiting for {len(targets)} targets ({limit}):")
        for target in targets:
            self._line(f"  {target}")

    def __call__(self, event: Event) -> None:
        self.pacer.see(event)
        if event.type is EventType.NOT_READY:
            if self.pacer.is_news(event):
                # --stable's window: ready every time, not for long enough yet
                state = "stable yet" if event.holding else self._state(True)
                line = f"{event.target} not {state}: {event.reason}"
                if self.pacer.tell(event, len(line) + 9):  # and "waitfor: "
                    self._line(line)
            progress = self.pacer.progress(event.elapsed)
            if progress is not None:
                self._line(progress_text(progress))
        elif event.type is EventType.READY:
            self._line(f"{event.target} is {self._state(True)}: {event.reason}")

    def finish(self, results: Sequence[TargetResult]) -> None:
        for r in results:
            self._line(
                self._final_line(r.target, r.ready, r.elapsed, r.attempts, r.reason, r.cancelled)
            )


class LiveReporter(TextReporter):
    """One status line per target, redrawn in place; for a terminal.

    At most :data:`ROWS` rows (the targets still awaited first), and the redraws share a byte
    budget as the text output's lines do: live at first, then as often as the budget allows
    (readiness and the end are always drawn).
    """

    SPINNER = "|/-\\"
    LISTS_TARGETS = False
    ROWS = 10  # more would scroll off a small terminal, and the cursor cannot move back over them
    BYTES_PER_DAY = 1_500_000  # no progress lines here: the rows are the progress

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        #: each target's row: its latest event (formatted when drawn), or None before one
        self._rows: dict[Target, Event | None] = {}
        self._drawn = 0
        self._last_draw = -1.0
        self._cost = 0
        self._now = 0.0
        self._budget = TokenBucket(self.BYTES_PER_DAY / DAY, 16_000)  # bytes

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        super().begin(targets, timeout)
        self._rows = dict.fromkeys(targets)
        self._draw(force=True)

    def __call__(self, event: Event) -> None:
        if event.type is EventType.ATTEMPT:
            return
        self._now = max(self._now, event.elapsed)
        self._rows[event.target] = event
        self._draw(force=event.type is not EventType.NOT_READY)

    def _row(self, target: Target, event: Event | None) -> str:
        if event is None:
            return f"  {target}: starting"
        if event.type is EventType.READY:
            return f"+ {target}: {self._state(True)} after {event.elapsed:.2f}s: {event.reason}"
        spin = self.SPINNER[event.attempt % len(self.SPINNER)]
        return f"{spin} {target}: {event.reason} ({_attempts(event.attempt)}, {event.elapsed:.1f}s)"

    def finish(self, results: Sequence[TargetResult]) -> None:
        self._draw(force=True)
        self._erase()
        super().finish(results)

    def note(self, text: str) -> None:
        self._erase()
        super().note(text)
        self._draw(force=True)

    def _draw(self, force: bool) -> None:
        import shutil  # each output mode imports only what it uses: cold start counts

        if not force and (
            self._now - self._last_draw < 0.1 or not self._budget.has(self._cost, self._now)
        ):
            return  # the last draw's cost: the next one costs about as much
        size = shutil.get_terminal_size()
        width = max(size.columns - 1, 20)
        rows = self._shown(max(min(self.ROWS, size.lines - 2), 2))
        drawn = "".join(row[:width] + "\n" for row in rows)
        cost = len(drawn.encode()) + 8
        if force:
            self._budget.charge(cost, self._now)
        elif not self._budget.afford(cost, self._now):
            return
        self._last_draw, self._cost = self._now, cost
        self._erase()
        self.stream.write(drawn)
        self._drawn = len(rows)
        self.stream.flush()

    def _shown(self, limit: int) -> list[str]:
        """The rows that fit: the targets still awaited first, then one row for the rest."""
        rows = list(self._rows.items())
        if len(rows) > limit:
            awaited = [(t, e) for t, e in rows if e is None or e.type is not EventType.READY]
            ready = len(rows) - len(awaited)
            rows = awaited + [
                (t, e) for t, e in rows if e is not None and e.type is EventType.READY
            ]
            rest = rows[limit - 1 :]
            done = ready - max(0, limit - 1 - len(awaited))  # the ready ones among the rest
            more = f"  ... and {len(rest)} more targets ({done} {self._state(True)})"
            return [self._row(*row) for row in rows[: limit - 1]] + [more]
        return [self._row(*row) for row in rows]

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")  # up N lines, clear to the end
            self._drawn = 0


class JsonReporter(Reporter):
    """One JSON object per line: the begin, changes and progress at the pace of the text output
    (:mod:`waitfor.core.pacing`), readiness and timeouts always, then one per target as a summary.
    Attempts themselves are not told (two lines an attempt were the flood)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self.pacer = Pacer()

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        self.pacer.begin(targets)
        self._emit({"event": "begin", "targets": [str(t) for t in targets], "timeout": timeout})

    def __call__(self, event: Event) -> None:
        self.pacer.see(event)
        if event.type is EventType.ATTEMPT:
            return
        if event.type is EventType.NOT_READY:
            if self.pacer.is_news(event):
                line = json_line(self._record(event))
                if self.pacer.tell(event, len(line.encode())):
                    self._write(line)
            progress = self.pacer.progress(event.elapsed)
            if progress is not None:
                self._write(self._progress_line(progress))
            return
        self._emit(self._record(event))

    def _record(self, event: Event) -> dict[str, object]:
        return {
            "event": event.type.value,
            "target": str(event.target),
            "attempt": event.attempt,
            "elapsed": round(event.elapsed, 4),
            "reason": event.reason,
            # ready / down (inverted): what a ready event means, in a word
            **({"state": self._state(True)} if event.type is EventType.READY else {}),
            **({"holding": True} if event.holding else {}),
        }

    def _progress_line(self, progress: Progress) -> str:
        """A ``progress`` event, at most PROGRESS_BYTES: named targets are left out to fit."""
        shown = [
            {
                "target": cut(str(e.target), ENTRY_CHARS),
                "attempt": e.attempt,
                "reason": cut(e.reason, ENTRY_CHARS),
            }
            for e in progress.shown
        ]
        while True:
            line = json_line(
                {
                    "event": "progress",
                    "elapsed": round(progress.elapsed, 4),
                    "waiting": progress.waiting,
                    "total": progress.total,
                    "shown": shown,
                    "more": progress.waiting - len(shown),
                }
            )
            if len(line) <= PROGRESS_BYTES or not shown:  # ASCII: JSON escapes the rest
                return line
            shown.pop()

    def finish(self, results: Sequence[TargetResult]) -> None:
        for r in results:
            self._emit(
                {
                    "event": "summary",
                    "target": str(r.target),
                    "ready": r.ready,
                    "state": self._state(r.ready),  # ready / not_ready, inverted down / up
                    "attempts": r.attempts,
                    "elapsed": round(r.elapsed, 4),
                    "reason": r.reason,
                }
            )

    def note(self, text: str) -> None:
        self._emit({"event": "note", "message": text})

    def _emit(self, record: dict[str, object]) -> None:
        self._write(json_line(record))

    def _write(self, line: str) -> None:
        self.stream.write(line)
        self.stream.flush()


class Tee(Reporter):
    """Several reporters as one: each gets every call, in order; notes go to the first."""

    def __init__(self, first: Reporter, *others: Reporter) -> None:
        super().__init__(first.stream)
        self.reporters = (first, *others)

    @property  # a Tee's words are its reporters'
    def invert(self) -> bool:
        return self.reporters[0].invert

    @invert.setter
    def invert(self, value: bool) -> None:
        for reporter in self.reporters:
            reporter.invert = value

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        for reporter in self.reporters:
            reporter.begin(targets, timeout)

    def __call__(self, event: Event) -> None:
        for reporter in self.reporters:
            reporter(event)

    def finish(self, results: Sequence[TargetResult]) -> None:
        for reporter in self.reporters:
            reporter.finish(results)

    def note(self, text: str) -> None:
        self.reporters[0].note(text)


def json_line(record: dict[str, object]) -> str:
    """One JSON line, stamped with the time; what -o json writes for events and errors alike."""
    import json
    from datetime import UTC, datetime

    return (
        json.dumps({"time": datetime.now(UTC).isoformat(timespec="milliseconds"), **record}) + "\n"
    )


def error_line(message: str, exit_code: int, *, as_json: bool) -> str:
    """The line an error that ends waitfor is told in: JSON (an ``error`` event) with -o json."""
    if as_json:
        return json_line({"event": "error", "reason": message, "exit_code": exit_code})
    return f"waitfor: error: {message}\n"


def exit_line(exit_code: int, command: str | None = None) -> str:
    """The ``exit`` event, the last line of a -o json run that no ``error`` event ended: ready
    (0) or timed out (124); ``command``: waitfor execs it next (exit code 0 as far as it goes)."""
    outcome = "exec" if command is not None else {0: "ready", 124: "timed_out"}[exit_code]
    record: dict[str, object] = {"event": "exit", "exit_code": exit_code, "outcome": outcome}
    if command is not None:
        record["command"] = command
    return json_line(record)


def make_reporter(output: str, stream: TextIO) -> Reporter:
    if output == "auto":
        output = "tty" if stream.isatty() else "text"
    reporters: dict[str, type[Reporter]] = {
        "text": TextReporter,
        "tty": LiveReporter,
        "json": JsonReporter,
        "quiet": Reporter,
    }
    return reporters[output](stream)
