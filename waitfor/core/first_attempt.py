"""The first attempt without the event loop: a ready target's start-up costs no asyncio import.

Most waits find their dependencies already up (an init container restarted with its database
running, a script run twice): one attempt per target decides, and importing asyncio (a third of
waitfor's start-up) would be wasted. Here each target gets that first attempt synchronously,
through its kind's :meth:`~waitfor.kind.Check.probe_now`, one after the other within
:data:`QUICK_BUDGET`; when the attempts so far show the rest would not fit in it, at once.

This path only ever answers "all ready". Anything else — a kind without ``probe_now``, a target
not ready or slow to answer — returns None having reported nothing, and the runner waits from
the same start time and deadline, as if this had not happened. When all are ready it emits the
runner's own events (each target's attempt, then its readiness, in order) to the same reporter,
so the lines, exit code and exec that follow are those of the runner's path.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from waitfor.base import sanitize
from waitfor.base.deadline import Deadline
from waitfor.core.check import Check
from waitfor.core.events import Event, EventHandler, EventType, TargetResult
from waitfor.core.registry import check_class
from waitfor.core.target import Target
from waitfor.errors import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: the variable that scales :data:`QUICK_BUDGET`, read once, here: for a process slowed down as a
#: whole (valgrind's ~50x, a test of what a ready target imports on a loaded machine), which
#: should still take the path it takes at full speed; not an option (CONTRIBUTING.md)
BUDGET_SCALE = "WAITFOR_QUICK_BUDGET_SCALE"


def _scale(text: str) -> float:
    try:
        scale = float(text)
    except ValueError:
        scale = 0.0
    if not 0 < scale < float("inf"):
        raise UsageError(f"{BUDGET_SCALE} must be a positive number (a factor of the budget)")
    return scale


#: the most the synchronous attempts may take together before the runner takes over
QUICK_BUDGET = 0.25 * _scale(os.environ.get(BUDGET_SCALE, "1"))


def all_ready_now(
    targets: Sequence[Target],
    *,
    started: float,
    budget: float,
    emit: EventHandler,
    began_at: list[float] | None = None,
    made: list[Check[Any]] | None = None,
) -> list[TargetResult] | None:
    """Each target's result if every one is ready at its first attempt, else None.

    ``began_at`` receives when (since ``started``) each target's attempt began, for the runner to
    count the time of the one that was left without an answer; ``made``, the checks asked, for
    the runner to go on with (what an attempt learnt, a 429's Retry-After, is the check's).
    """
    classes = [check_class(target.scheme) for target in targets]
    if any(cls.probe_now is Check.probe_now for cls in classes):
        return None  # some kind can only be asked on the event loop
    ends = started + min(budget, QUICK_BUDGET)
    attempts: list[Event] = []
    readies: list[Event] = []
    first = time.monotonic()
    for done, (target, cls) in enumerate(zip(targets, classes, strict=True)):
        began = time.monotonic()
        if began >= ends:
            return None
        if done and (began - first) / done * (len(targets) - done) > ends - began:
            return None  # the rest will not fit at this pace (300 TLS handshakes): stop now
        attempts.append(Event(EventType.ATTEMPT, target, 1, began - started))
        if began_at is not None:
            began_at.append(began - started)
        check = cls(target)
        if made is not None:
            made.append(check)
        outcome = check.probe_now(Deadline(ends, ends - began))
        if outcome is None or not outcome.ready or outcome.permanent:
            return None
        reason = sanitize.shown(outcome.reason, target.secrets)  # as the runner shows it
        readies.append(Event(EventType.READY, target, 1, time.monotonic() - started, reason))
    for event in [*attempts, *readies]:
        emit(event)
    return [TargetResult(e.target, True, 1, e.elapsed, e.reason) for e in readies]
