"""Every error waitfor raises on purpose, each carrying the exit code the CLI uses for it.

    WaitforError                 base class; never raised itself
    ├── UsageError           2   bad input: a target, an option, a duration, a misuse of the API
    │   └── TargetError      2   a target string that cannot be parsed (names the target)
    ├── CheckFailed          2   a check hit a problem retrying cannot fix (libpq "no attempt",
    │                            credentials the server demands but none were given)
    ├── WaitTimeout        124   the deadline passed before every target was ready; also a
    │                            TimeoutError, as Python code expects of a timeout
    └── Interrupted 130/143/129  SIGINT / SIGTERM / SIGHUP arrived while waiting

Anything else that escapes is a bug and is meant to surface as one.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

    from waitfor.core.events import TargetResult


class WaitforError(Exception):
    exit_code: ClassVar[int] = 1


class UsageError(WaitforError):
    exit_code = 2


class TargetError(UsageError):
    """A target string that is not a valid target; the message names it (redacted)."""

    #: the target's characters quoted at most: a 10,000-character #sql= made a 100 KB line
    SHOWN = 300

    def __init__(self, target: str, problem: str) -> None:
        shown = repr(target[: self.SHOWN]) + ("..." if len(target) > self.SHOWN else "")
        super().__init__(f"invalid target {shown}: {problem}")
        self.target = target
        self.problem = problem


class CheckFailed(WaitforError):
    """A check found a problem that retrying cannot fix; the message names the target.

    Not a :class:`UsageError`: the input was valid, the target's configuration is not.
    """

    exit_code = 2

    def __init__(self, target: str, reason: str) -> None:
        from waitfor.base.sanitize import (
            shown,  # the runner's reasons are clean; a plugin's may not be
        )

        reason = shown(reason)
        super().__init__(f"{target}: {reason}")
        self.target = target
        self.reason = reason


class WaitTimeout(WaitforError, TimeoutError):
    """The deadline passed; `results` holds every target's state and last reason."""

    exit_code = 124

    def __init__(self, timeout: float, results: Sequence[TargetResult]) -> None:
        self.timeout = timeout
        self.results = tuple(results)
        pending = [r for r in self.results if not r.ready]
        detail = "; ".join(f"{r.target}: {r.reason}" for r in pending)
        if timeout:
            super().__init__(f"timed out after {timeout:g}s waiting for {detail}")
        else:  # the library's timeout=0: one attempt each
            super().__init__(f"not ready at the first attempt: {detail}")


class Interrupted(WaitforError):
    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return 128 + self.signum
