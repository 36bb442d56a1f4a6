"""Await every target concurrently under one deadline; report through events, never print.

Each target runs its own attempt loop. An attempt is bounded by ``min(attempt_timeout, time left)``
and the whole wait by one cancellation scope, so a hanging connect can never carry the wait past
its deadline. When the wait ends for any reason (all ready, deadline, a permanent failure,
cancellation from outside), every sibling task is cancelled and awaited before returning.
"""

from __future__ import annotations

import asyncio
import errno
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from waitfor.base import sanitize
from waitfor.base.backoff import Backoff
from waitfor.base.deadline import Deadline
from waitfor.base.outcome import Outcome
from waitfor.core.check import Check
from waitfor.core.events import Event, EventHandler, EventType, TargetResult
from waitfor.core.registry import check_class
from waitfor.core.target import Target
from waitfor.errors import CheckFailed, WaitTimeout
from waitfor.net import activity
from waitfor.net.errors import describe_os_error

__all__ = ["Event", "EventHandler", "EventType", "TargetResult", "run"]


#: an attempt still running at the deadline for this long is reported as hanging
SLOW_ATTEMPT = 1.0
#: an answer this close to the wait's deadline came with it (asyncio runs a timer up to its
#: clock's resolution early): not a finding unless it is the ready one
DEADLINE_SLACK = 0.001


@dataclass
class _State:
    target: Target
    attempts: int = 0
    ready_at: float | None = None
    reason: str = "no attempt finished yet"
    attempt_began: float | None = None  # set while an attempt is in flight
    attempt_ends: float = math.inf  # that attempt's own deadline
    activity: activity.Activity | None = None  # what the attempt in flight waits on
    steady_since: float | None = None  # --stable: when its unbroken run of ready answers began


async def run(
    targets: Sequence[Target],
    *,
    timeout: float | None,
    attempt_timeout: float,
    backoff: Backoff,
    invert: bool = False,
    on_event: EventHandler | None = None,
    rng: random.Random | None = None,
    spent: float = 0.0,
    first_began: Sequence[float] = (),
    first_checks: Sequence[Check[Any]] = (),
    once: bool = False,
    stable: float = 0.0,
    any_ready: bool = False,
    delay: float = 0.0,
) -> list[TargetResult]:
    """Wait for all targets; raise WaitTimeout or CheckFailed. ``timeout=None`` waits forever.

    ``once``: one attempt per target (each bounded by ``attempt_timeout``), then the results,
    or WaitTimeout if any was not ready: "is it ready now?".

    ``spent`` is how long this wait already took before the loop ran (a synchronous first
    attempt, :mod:`waitfor.core.first_attempt`): it counts against the deadline and in elapsed
    times.
    ``first_began[i]``: when (after the start) target i's synchronous attempt began; its first
    attempt here continues that one and is timed from there; ``first_checks[i]``, the check that
    attempt asked, is target i's here too.

    ``stable``: seconds a target must keep answering ready (every attempt, probed at the
    backoff's cap meanwhile) before it counts; a failure starts the window again. A target's
    own ``#stable=`` wins. ``any_ready``: done when any one target is ready; the others are
    cancelled (WaitTimeout only when none was). ``delay``: seconds after the start before each
    target's first attempt (the deadline still counts from the start).
    """
    run = _Run(
        timeout=timeout,
        attempt_timeout=attempt_timeout,
        backoff=backoff,
        invert=invert,
        emit=on_event or (lambda event: None),
        rng=rng or random.Random(),
        spent=spent,
        once=once,
        stable=stable,
        delay=delay,
    )
    states = [_State(target) for target in targets]
    checks = [*first_checks, *[check_class(t.scheme)(t) for t in targets[len(first_checks) :]]]
    for check in checks:
        check.inverted = invert
    quick = [*first_began, *[None] * (len(states) - len(first_began))]
    tasks = [
        asyncio.create_task(run.await_target(s, c, q))
        for s, c, q in zip(states, checks, quick, strict=True)
    ]
    try:
        async with asyncio.timeout_at(run.deadline):
            await _decided(tasks, states, any_ready=any_ready)
        if any_ready:
            if all(state.ready_at is None for state in states):
                raise TimeoutError
        elif once and any(state.ready_at is None for state in states):
            raise TimeoutError  # one attempt each, and not every one was ready
    except TimeoutError:
        raise run.timed_out(states) from None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for check in checks:
            await check.aclose()
    return _results(states, run.elapsed())


@dataclass(kw_only=True)
class _Run:
    """One wait's clock and settings, and what each target's task does with them: the attempt
    loop (:meth:`await_target`, one attempt in :meth:`attempt`), the stable window
    (:meth:`holding`), and what is said when the deadline ends the wait (:meth:`timed_out`)."""

    timeout: float | None
    attempt_timeout: float
    backoff: Backoff
    invert: bool
    emit: EventHandler
    rng: random.Random
    spent: float  # before the event loop ran: counted against the deadline
    once: bool
    stable: float
    delay: float = 0.0

    def __post_init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.start = self.loop.time() - self.spent
        self.deadline = None if self.timeout is None else self.start + self.timeout

    def elapsed(self) -> float:
        return self.loop.time() - self.start

    def remaining(self, now: float | None = None) -> float:
        if self.deadline is None:
            return math.inf
        return max(self.deadline - (self.loop.time() if now is None else now), 0.0)

    async def await_target(self, state: _State, check: Check[Any], quick: float | None) -> None:
        """Attempt until the target is ready (``invert``: down), backing off between attempts."""
        target, invert = state.target, self.invert
        if self.delay > 0 and quick is None:
            state.reason = f"first attempt after the {self.delay:g}s delay"
            await asyncio.sleep(max(0.0, self.start + self.delay - self.loop.time()))
        while True:
            state.attempts += 1
            self.emit(Event(EventType.ATTEMPT, target, state.attempts, self.elapsed()))
            now = self.loop.time()
            outcome = await self.attempt(state, check, now, quick)
            # The one boundary for what a server said, whatever the kind: no secret, one line.
            reason = sanitize.shown(outcome.reason, target.secrets)
            if outcome.permanent:
                self.emit(Event(EventType.FAILED, target, state.attempts, self.elapsed(), reason))
                raise CheckFailed(str(target), reason)
            if outcome.ready != invert:
                pause = self.holding(state, reason)
                if pause is None:
                    state.ready_at = self.elapsed()
                    state.reason = reason  # what showed it ready (inverted: what showed it down)
                    ready = Event(EventType.READY, target, state.attempts, state.ready_at, reason)
                    self.emit(ready)
                    return
                if self.once:
                    return
                await asyncio.sleep(pause)
                continue
            state.steady_since = None  # a failure: the window starts again
            state.reason = f"still up, {reason}" if invert else reason
            self.emit(
                Event(EventType.NOT_READY, target, state.attempts, self.elapsed(), state.reason)
            )
            if self.once:
                return
            # the watch spaced the attempts
            took = self.loop.time() - now if check.WATCHES else 0.0
            left = self.remaining() + took
            backoff = self.backoff_of(target)
            delay = backoff.sleep_before_next(state.attempts, self.rng.random(), left)
            await asyncio.sleep(max(0.0, delay - took))

    async def attempt(
        self, state: _State, check: Check[Any], now: float, quick: float | None
    ) -> Outcome:
        """One attempt, begun ``now``, bounded by the attempt timeout and the time left; the
        first continues the synchronous one (begun ``quick`` seconds after the start)."""
        if state.attempts == 1 and quick is not None:
            state.attempt_began = self.start + quick  # continues the synchronous attempt
        else:
            state.attempt_began = now
        # One deadline per attempt: enforced here, read by the probe and its connections.
        # from `now`, as the attempt's deadline is: one bounded by the wait's ends exactly at it
        budget = min(self.attempt_timeout - (now - state.attempt_began), self.remaining(now))
        # the attempt's whole length, the synchronous part of a continued one included
        deadline = Deadline(now + budget, now + budget - state.attempt_began)
        state.attempt_ends = deadline.at
        state.activity = activity.track(
            carried=now - state.attempt_began, on_report=lambda said: self.reported(state, said)
        )
        if quick is not None and state.attempts == 1 and self.remaining() <= 0:
            # The synchronous first attempt took the wait's whole time: this probe would
            # only run past the deadline (importing its client, httpx's ~0.1 s) for nothing.
            await asyncio.Event().wait()  # the deadline's cancellation is due
        cutoff = asyncio.timeout_at(deadline.at)
        try:
            async with cutoff:
                outcome = await check.probe(deadline)
        except TimeoutError:
            named = state.activity.reason() or state.activity.reported
            # Cut off here: the length it was given, as the checks say theirs (a loop woken
            # late on a loaded machine made it "0.4s" for 0.3 s); a probe's own timeout: its.
            took = deadline.budget if cutoff.expired() else self.loop.time() - state.attempt_began
            outcome = Outcome.down(named or f"timed out after {took:.1f}s")
        except OSError as exc:
            # Out of descriptors (a low ulimit -n, many targets) wherever a check opens a
            # file or socket: not ready until siblings close theirs, never a crash.
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            outcome = Outcome.down(describe_os_error(exc))
        out_of_time = self.remaining() <= DEADLINE_SLACK
        if out_of_time and not outcome.permanent and (self.invert or not outcome.ready):
            # Cut short by the deadline, not a finding (inverted: a connect timed out is no
            # port closed): keep the last reason; the deadline's cancellation is due.
            await asyncio.Event().wait()
        state.attempt_began = None
        return outcome

    def holding(self, state: _State, reason: str) -> float | None:
        """For a ready answer: None if it counts now, else how long to pause before looking
        again (``--stable``: ready, but not for long enough yet; said as such)."""
        target = state.target
        hold = self.stable if target.stable is None else target.stable
        if hold <= 0:
            return None
        now = self.loop.time()
        if state.steady_since is None:
            state.steady_since = now
        held = now - state.steady_since
        if held >= hold:
            return None
        said = "down" if self.invert else "ready"
        state.reason = f"{said} for {held:.1f}s of {hold:g}s"
        state.reason += "" if self.invert else f" ({reason})"
        steady = Event(
            EventType.NOT_READY, target, state.attempts, self.elapsed(), state.reason, holding=True
        )
        self.emit(steady)
        # look again at the backoff's cap
        cap = self.backoff_of(target).delay(64, self.rng.random())
        pause = min(cap, hold - held, self.remaining())
        return max(pause, 0.0)

    def backoff_of(self, target: Target) -> Backoff:
        """The wait's backoff, or the target's own fixed ``#interval=``."""
        if target.interval is None:
            return self.backoff
        interval = target.interval
        return Backoff(initial=interval, multiplier=1.0, maximum=interval, jitter=0.0)

    def reported(self, state: _State, said: str) -> None:
        """A watching check's verdict so far: progress, and the reason if the wait ends now."""
        reason = sanitize.shown(said, state.target.secrets)
        reason = f"still up, {reason}" if self.invert else reason
        if reason != state.reason:
            state.reason = reason
            self.emit(
                Event(EventType.NOT_READY, state.target, state.attempts, self.elapsed(), reason)
            )

    def timed_out(self, states: Sequence[_State]) -> WaitTimeout:
        """The deadline ended the wait: each target not ready told so, with its last reason (or
        that its attempt in flight hung), and the error that says it."""
        now = self.elapsed()
        for state in states:
            if state.ready_at is None:
                if state.attempt_began is not None:
                    # waited until the deadline: a loop woken late (a loaded machine) adds
                    # nothing the attempt waited for
                    ended = min(self.loop.time(), self.deadline or float("inf"))
                    in_flight = _in_flight_reason(state, ended)
                    state.reason = sanitize.shown(in_flight, state.target.secrets)
                self.emit(
                    Event(EventType.TIMED_OUT, state.target, state.attempts, now, state.reason)
                )
        return WaitTimeout(self.timeout or 0.0, _results(states, now))


async def _decided(
    tasks: Sequence[asyncio.Task[None]], states: Sequence[_State], *, any_ready: bool
) -> None:
    """Until every target's loop has ended (``any_ready``: :func:`_first_ready`); a CheckFailed
    re-raised."""
    if any_ready:
        await _first_ready(tasks, states)
        return
    done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    for task in done:
        task.result()  # re-raises a CheckFailed


async def _first_ready(tasks: Sequence[asyncio.Task[None]], states: Sequence[_State]) -> None:
    """Until one target is ready (or every loop has ended: ``once``); a CheckFailed re-raised."""
    pending = set(tasks)
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
        if any(state.ready_at is not None for state in states):
            return


def _in_flight_reason(state: _State, now: float) -> str:
    """The last reason, or that the attempt cut off by the deadline was itself hanging."""
    # no longer than its own deadline: a loop woken late has not made it wait longer
    waited = min(now, state.attempt_ends) - (state.attempt_began or now)
    if waited <= 0:  # begun at the deadline or after it (a process starved of CPU): no hang
        return state.reason
    named = state.activity.reason(now) if state.activity is not None else None
    if named is None and state.activity is not None and state.activity.reported is not None:
        return state.reason  # a watching check said what it knows meanwhile: that is the news
    if state.attempts <= 1:
        return named or f"timed out after {waited:.1f}s"
    if waited < SLOW_ATTEMPT:  # cut off early: what the previous attempt saw is the news
        return state.reason
    return f"{named or f'timed out after {waited:.1f}s'}; previous attempt: {state.reason}"


def _results(states: Sequence[_State], now: float) -> list[TargetResult]:
    # one ready means the rest were cancelled (--any; without it, all are ready or none is)
    won = any(s.ready_at is not None for s in states)
    return [
        TargetResult(
            target=s.target,
            ready=s.ready_at is not None,
            attempts=s.attempts,
            elapsed=s.ready_at if s.ready_at is not None else now,
            reason=s.reason,
            cancelled=won and s.ready_at is None,
        )
        for s in states
    ]
