"""What an attempt is waiting on right now, so an attempt cut off there can say so.

The runner starts a fresh :class:`Activity` for every attempt (:func:`track`); a probe, or a
helper it calls, names a wait with ``with waiting_on(describe): ...``. When the attempt's timeout
or the deadline cuts the wait off, the runner reports ``describe(seconds waited)`` ("resolving db:
no answer from 10.96.0.10 after 1.0s") instead of a bare "timed out after 1.0s".

A probe that watches (a Kubernetes watch lasts the whole attempt) also says what it knows while
it waits, with :func:`report`: the runner shows it as progress, and as the reason of a wait cut
off or interrupted meanwhile, instead of waiting for the attempt to end to know anything.

The activity lives in a context variable holding a mutable object, so tasks a probe starts
(``asyncio.gather``) write to the same attempt's activity.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

Describe = Callable[[float], str | None]  # seconds waited -> reason (None: nothing slow)


@dataclass
class Activity:
    describe: Describe | None = None
    since: float = 0.0  # time.monotonic() when the current wait began
    #: seconds the attempt waited before the event loop took it over (its synchronous first
    #: part): counted in the waits it begins with, which go on waiting for the same answers
    #: (the same nameserver, host or peer: the first attempt asked them first)
    carried: float = 0.0
    #: the attempt's verdict so far (:func:`report`), and who wants to hear of a change
    reported: str | None = None
    on_report: Callable[[str], None] | None = None

    def reason(self, now: float | None = None) -> str | None:
        """Why the attempt is not finished, if a probe said what it waits on (and it still
        does: a describe may find nothing slow any more)."""
        if self.describe is None:
            return None
        return self.describe((time.monotonic() if now is None else now) - self.since)


_current: ContextVar[Activity | None] = ContextVar("waitfor_activity", default=None)


def track(carried: float = 0.0, on_report: Callable[[str], None] | None = None) -> Activity:
    """Start a new activity for the attempt about to run in this task."""
    activity = Activity(carried=carried, on_report=on_report)
    _current.set(activity)
    return activity


def report(reason: str) -> None:
    """The attempt in flight is not done, and this is why (the verdict it would give now)."""
    activity = _current.get()
    if activity is None or activity.reported == reason:  # library use, or nothing new
        return
    activity.reported = reason
    if activity.on_report is not None:
        activity.on_report(reason)


@contextmanager
def waiting_on(describe: Describe) -> Iterator[None]:
    """Name the wait inside the block; a cancelled block leaves its name for the runner."""
    activity = _current.get()
    if activity is None:  # called outside the runner (library use): nobody to tell
        yield
        return
    previous = activity.describe, activity.since
    activity.describe, activity.since = describe, time.monotonic() - activity.carried
    try:
        yield
    except asyncio.CancelledError:
        raise  # cut off here: this is the news
    except BaseException:
        activity.describe, activity.since = previous
        raise
    activity.describe, activity.since = previous
    activity.carried = 0.0  # a wait answered: the next ones (A and AAAA at once: both) are new
