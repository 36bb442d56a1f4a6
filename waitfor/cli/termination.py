"""The termination message: why the wait failed, where ``kubectl describe pod`` shows it.

The kubelet gives every container a file, ``/dev/termination-log`` (its
``terminationMessagePath``), and shows what the container wrote there as "Last State:
Terminated ... Message" once it exits. When waitfor ends without success (timed out 124, bad
configuration 2, interrupted 130/143/129, a command that cannot be run 126/127) it writes its
final reasons there: a headline, then one line per target that was not ready. Nothing on success.

What is written is built from what the reporters print: redacted targets and reasons that passed
:mod:`waitfor.base.sanitize`, so no secret. At most :data:`LIMIT` bytes (the kubelet's own cap), cut
at a line, else at a character. Writing never fails the wait: a missing, read-only or odd file
(a FIFO nobody reads) is left alone, silently.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from waitfor.cli.report import Reporter
from waitfor.core.events import Event, EventType, TargetResult
from waitfor.core.target import Target

DEFAULT_PATH = "/dev/termination-log"
ENV = "WAITFOR_TERMINATION_LOG"
LIMIT = 4096  # bytes: the kubelet reads no more
ELLIPSIS = "..."


class TerminationLog(Reporter):
    """A reporter that prints nothing: it remembers each target's last reason for :meth:`write`."""

    def __init__(self, path: str | None = None) -> None:
        super().__init__(sys.stderr)  # never written to
        self.path = path
        self._last: dict[Target, tuple[bool, str]] = {}  # target -> (settled, reason)

    def begin(self, targets: Sequence[Target], timeout: float | None) -> None:
        for target in targets:
            self._last.setdefault(target, (False, "no attempt finished yet"))

    def __call__(self, event: Event) -> None:
        if event.type is EventType.ATTEMPT:
            self._last.setdefault(event.target, (False, "no attempt finished yet"))
        elif event.type in (EventType.READY, EventType.FAILED):
            # settled: a failure's reason is the headline, not said twice
            self._last[event.target] = (True, event.reason)
        elif event.reason:
            self._last[event.target] = (False, event.reason)

    def finish(self, results: Sequence[TargetResult]) -> None:
        pass

    def timed_out(self, headline: str, results: Sequence[TargetResult]) -> None:
        lines = [f"{r.target}: {r.reason}" for r in results if not r.ready]
        self.write(headline, lines)

    def failed(self, headline: str) -> None:
        """The wait ended without success for ``headline``'s reason (an error line)."""
        lines = [f"{t}: {reason}" for t, (settled, reason) in self._last.items() if not settled]
        self.write(headline, lines)

    def write(self, headline: str, lines: Sequence[str]) -> None:
        path = self.path or os.environ.get(ENV) or DEFAULT_PATH
        if not self.path and not os.environ.get(ENV) and not os.path.exists(path):
            return  # not in a container: no file, and none is made
        write_file(path, bounded([headline, *lines]))


def bounded(lines: Sequence[str], limit: int = LIMIT) -> bytes:
    """``lines`` as at most ``limit`` bytes of UTF-8: whole lines while they fit, then one saying
    how many were left out; a first line longer than all of it is cut at a character."""
    clean = [" ".join(line.split()) for line in lines]  # one line each, whatever a part held
    out: list[bytes] = []
    used = 0
    for index, line in enumerate(clean):
        data = line.encode("utf-8", "backslashreplace") + b"\n"
        rest = len(clean) - index - 1
        # room kept for the line saying how many were left out, should the next one not fit
        reserve = len(f"... and {rest} more\n") if rest else 0
        if used + len(data) + reserve > limit:
            if index:
                out.append(f"... and {rest + 1} more\n".encode())
                break
            # the headline alone is too long: cut at a character
            room = limit - reserve - len(ELLIPSIS) - 1
            data = data[:room].decode("utf-8", "ignore").encode() + ELLIPSIS.encode() + b"\n"
        out.append(data)
        used += len(data)
    return b"".join(out)


def write_file(path: str, data: bytes) -> None:
    """``data`` into ``path``, replacing what was there; any problem is ignored."""
    try:
        # O_NONBLOCK: a FIFO without a reader must not hang the exit; O_NOCTTY: never a terminal
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK | os.O_NOCTTY)
    except (OSError, ValueError):
        return
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            if written <= 0:
                break
            view = view[written:]
    except OSError:
        pass
    finally:
        os.close(fd)


#: the command's termination log: the CLI sets it once the options are read
current = TerminationLog()
