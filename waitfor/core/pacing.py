"""How much a long wait says: changes at a pace that decays, and one progress line for all.

A forgotten init container may wait for days for a dependency that never comes; its log must
not grow with the number of attempts or targets. Every output (text, the live view, JSON lines,
the library's logger) asks a :class:`Pacer` which lines to write:

- a target's first reason, and its readiness (or timeout), always: a line or two per target;
- a *changed* reason once the target's gap has passed (2 s, doubling with each line told, up
  to a minute); a reason that changed in more than its numbers (refused, then "ready for 0.2s
  of 2s": a flap, not a counter) after a shorter gap (0.25 s, doubling likewise); and only
  while the process's byte budget allows (:data:`CHANGE_BYTES_PER_DAY`, a :data:`CHANGE_BURST`
  at the start);
- one progress line for all the targets still awaited, after 10 s, then at intervals doubling
  to a minute, at most :data:`PROGRESS_BYTES`: the count, and a few of them with their reasons
  (taking turns).

So a day costs at most 0.8 MB of changes plus 1440 x 500 B of progress, about 1.5 MB, whatever
the number of targets, plus the few lines each target has once. The clock is the events' own
``elapsed``: the pace is the same in a test that feeds a day of events in a second.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from waitfor.base.bucket import TokenBucket
from waitfor.core.events import Event, EventType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from waitfor.core.targets import Target

#: a target's reason that changes at every attempt is told at most this often at first, the
#: gap doubling with each line told up to CHANGE_EVERY_MAX
CHANGED_REASON_EVERY = 2.0
#: the same for a reason that changed in more than its numbers
CHANGED_WORDS_EVERY = 0.25
CHANGE_EVERY_MAX = 60.0
#: the byte budget of change lines, per process (all targets together)
CHANGE_BYTES_PER_DAY = 800_000
CHANGE_BURST = 16_000
#: the first progress line comes after this, the next ones at intervals doubling to the maximum
STILL_WAITING_EVERY = 10.0
PROGRESS_EVERY_MAX = 60.0
PROGRESS_BYTES = 500
PROGRESS_SHOWN = 3  # targets named, with their reasons, in one progress line
ENTRY_CHARS = 100  # a named target, and its reason, each cut to this in a progress line
DAY = 86_400.0


class Progress:
    """The targets still awaited, for one progress line: how many, and a few of them."""

    def __init__(self, waiting: int, total: int, elapsed: float, shown: Sequence[Event]) -> None:
        self.waiting = waiting
        self.total = total
        self.elapsed = elapsed
        self.shown = list(shown)  # each a target's latest not-ready event

    @property
    def more(self) -> int:
        return self.waiting - len(self.shown)


class _Track:
    """What a pacer knows of one target."""

    __slots__ = ("done", "gap", "latest", "told", "told_at", "words_gap")

    def __init__(self) -> None:
        self.latest: Event | None = None  # the last not-ready event, while awaited
        self.done = False  # ready, failed or timed out
        self.told: str | None = None  # the last reason told, when, and the gap before the next
        self.told_at = 0.0
        self.gap = CHANGED_REASON_EVERY
        self.words_gap = CHANGED_WORDS_EVERY


class Pacer:
    """Which of a wait's lines are written; one per output (see the module's docstring)."""

    def __init__(self, per_day: float = CHANGE_BYTES_PER_DAY, burst: float = CHANGE_BURST) -> None:
        self.budget = TokenBucket(per_day / DAY, burst)  # of bytes, for the change lines
        self._tracks: dict[Target, _Track] = {}  # every target, in the order given
        self._seen: tuple[Event, _Track] | None = None  # the last event seen: one lookup each
        self._cost = 0  # the last change line's: the next costs about as much
        self._progress_gap = STILL_WAITING_EVERY
        self._progress_at = STILL_WAITING_EVERY
        self._turn = 0  # where the next progress line starts naming targets

    def begin(self, targets: Sequence[Target]) -> None:
        for target in targets:
            self._tracks.setdefault(target, _Track())

    def see(self, event: Event) -> None:
        """Every event, before anything is asked about it."""
        track = self._tracks.get(event.target)
        if track is None:
            track = self._tracks[event.target] = _Track()
        self._seen = (event, track)
        if event.type is EventType.NOT_READY:
            track.latest = event
        elif event.type is not EventType.ATTEMPT:
            track.done = True
            track.latest = None

    def is_news(self, event: Event) -> bool:
        """Whether a not-ready event may be told now: its target's first reason, or a changed
        one after the target's gap while the budget has about a line's worth (:meth:`tell`
        asks it for the line itself): a line is made only when it may well be written."""
        track = self._track(event)
        if track.told is None:
            return True
        if event.reason == track.told:
            return False
        since = event.elapsed - track.told_at
        if since < track.gap and (
            since < track.words_gap or _words(event.reason) == _words(track.told)
        ):
            return False
        return self.budget.has(self._cost, event.elapsed)

    def tell(self, event: Event, cost: int) -> bool:
        """Whether the line of a not-ready event :meth:`is_news` (``cost`` bytes) is written;
        if so it counts as told. A first reason always is."""
        track = self._track(event)
        self._cost = cost
        if track.told is None:
            self.budget.charge(cost, event.elapsed)
        elif self.budget.afford(cost, event.elapsed):
            track.gap = min(track.gap * 2, CHANGE_EVERY_MAX)
            track.words_gap = min(track.words_gap * 2, CHANGE_EVERY_MAX)
        else:
            return False
        track.told, track.told_at = event.reason, event.elapsed
        return True

    def progress(self, now: float) -> Progress | None:
        """The progress line's content when one is due, else None."""
        if now < self._progress_at:
            return None
        self._progress_gap = min(self._progress_gap * 2, PROGRESS_EVERY_MAX)
        self._progress_at = now + self._progress_gap
        waiting = [track for track in self._tracks.values() if not track.done]
        if not waiting:
            return None
        known = [track.latest for track in waiting if track.latest is not None]
        start = self._turn % len(known) if known else 0
        shown = (known[start:] + known[:start])[:PROGRESS_SHOWN]
        self._turn = start + len(shown)
        return Progress(len(waiting), len(self._tracks), now, shown)

    def _track(self, event: Event) -> _Track:
        if self._seen is not None and self._seen[0] is event:
            return self._seen[1]
        self.see(event)
        assert self._seen is not None
        return self._seen[1]


_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


def _words(reason: str) -> str:
    """A reason without its numbers: what is left changes when the state does, not a counter."""
    return _NUMBERS.sub("#", reason)


def cut(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters, an ellipsis saying where it was cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cut_bytes(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` UTF-8 bytes (whole characters), an ellipsis if cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[: limit - 3].decode(errors="ignore") + "…"


def attempts(count: int) -> str:
    """ "1 attempt", "3 attempts"."""
    return f"{count} attempt{'s' if count != 1 else ''}"


def progress_text(progress: Progress) -> str:
    """The progress line, at most PROGRESS_BYTES: one target in full, several in a summary."""
    seconds = f"{progress.elapsed:.0f}s"
    if progress.waiting == 1 and progress.shown:
        e = progress.shown[0]
        text = (
            f"still waiting for {e.target} ({attempts(e.attempt)}, {seconds}), "
            f"last error: {e.reason}"
        )
        return cut_bytes(text, PROGRESS_BYTES)
    head = f"still waiting for {progress.waiting} of {progress.total} targets ({seconds})"
    parts = [
        f"{cut(str(e.target), ENTRY_CHARS)}: {cut(e.reason, ENTRY_CHARS)}" for e in progress.shown
    ]
    if progress.more and parts:
        parts.append(f"and {progress.more} more")
    return cut_bytes(f"{head}: {'; '.join(parts)}" if parts else head, PROGRESS_BYTES)
