"""Turn runner events into what people (text, live TTY view) or programs (JSON lines) read.

Text output never floods: one line when a target's state or reason changes (at most one every
``CHANGED_REASON_EVERY`` seconds per target), a "still waiting" reminder every
``STILL_WAITING_EVERY`` seconds per target, and a summary line per target at the end.
Everything goes to the given stream (stderr from the CLI); targets print in redacted form only.
A reason always comes last, after a colon, never in parentheses: it may hold its own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TextIO

from waitfor.core.events import Event, EventType, TargetResult
from waitfor.core.target import Target

STILL_WAITING_EVERY = 10.0
#: a reason that changes at every attempt (a counter, a clock in a command's output) is told
#: at most this often per target; the first one at once, the last one in the summary
CHANGED_REASON_EVERY = 2.0
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
        self, target: Target, ready: bool, elapsed: float, attempts: int, reason: str
    ) -> str:
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        if ready:
            return f"{target} {self._state(True)} after {elapsed:.2f}s ({tries})"
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
        self._said: dict[Target, tuple[str, float]] = {}  # last reason printed, and when

    #: several targets are listed one per line under the first (the live view's rows name them)
    LISTS_TARGETS = True

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
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
        target = event.target
        if event.type is EventType.NOT_READY:
            said = self._said.get(target)
            if said is None or (
                said[0] != event.reason and event.elapsed - said[1] >= CHANGED_REASON_EVERY
            ):
                self._line(f"{target} not {self._state(True)}: {event.reason}")
            elif event.elapsed - said[1] >= STILL_WAITING_EVERY:
                self._line(
                    f"still waiting for {target} ({event.attempt} attempts, {event.elapsed:.0f}s), "
                    f"last error: {event.reason}"
                )
            else:
                return
            self._said[target] = (event.reason, event.elapsed)
        elif event.type is EventType.READY:
            self._line(f"{target} is {self._state(True)}: {event.reason}")

    def finish(self, results: Sequence[TargetResult]) -> None:
        for r in results:
            self._line(self._final_line(r.target, r.ready, r.elapsed, r.attempts, r.reason))


class LiveReporter(TextReporter):
    """One status line per target, redrawn in place; for a terminal."""

    SPINNER = "|/-\\"
    LISTS_TARGETS = False

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._rows: dict[Target, str] = {}
        self._drawn = 0
        self._last_draw = 0.0

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        super().begin(targets, timeout)
        self._rows = {t: f"  {t}: starting" for t in targets}
        self._draw(force=True)

    def __call__(self, event: Event) -> None:
        t = event.target
        if event.type is EventType.READY:
            row = f"+ {t}: {self._state(True)} after {event.elapsed:.2f}s: {event.reason}"
        elif event.type in (EventType.NOT_READY, EventType.TIMED_OUT, EventType.FAILED):
            spin = self.SPINNER[event.attempt % len(self.SPINNER)]
            row = f"{spin} {t}: {event.reason} ({event.attempt} attempts, {event.elapsed:.1f}s)"
        else:
            return
        self._rows[t] = row
        self._draw(force=event.type is not EventType.NOT_READY)

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

        now = time.monotonic()
        if not force and now - self._last_draw < 0.1:
            return
        self._last_draw = now
        width = max(shutil.get_terminal_size().columns - 1, 20)
        self._erase()
        for row in self._rows.values():
            self.stream.write(row[:width] + "\n")
        self._drawn = len(self._rows)
        self.stream.flush()

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")  # up N lines, clear to the end
            self._drawn = 0


class JsonReporter(Reporter):
    """One JSON object per line for every event, then one per target as a summary."""

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        self._emit({"event": "begin", "targets": [str(t) for t in targets], "timeout": timeout})

    def __call__(self, event: Event) -> None:
        self._emit(
            {
                "event": event.type.value,
                "target": str(event.target),
                "attempt": event.attempt,
                "elapsed": round(event.elapsed, 4),
                "reason": event.reason,
                # ready / down (inverted): what a ready event means, in a word
                **({"state": self._state(True)} if event.type is EventType.READY else {}),
            }
        )

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
        self.stream.write(json_line(record))
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
