from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

import pytest

from tests.support.fakes import BEHAVIOURS, FakeCheck
from tests.support.fast import FAST
from waitfor.base.backoff import Backoff
from waitfor.core.runner import Event, EventType, run
from waitfor.core.targets import Target
from waitfor.errors import CheckFailed, WaitTimeout
from waitfor.kind import Outcome

UP = Outcome.up("up")
DOWN = Outcome.down("refused")

MakeTarget = Callable[..., Target]


def wait(
    targets: list[Target],
    *,
    timeout: float | None = 5,
    invert: bool = False,
    attempt_timeout: float = 5,
    events: list[Event] | None = None,
) -> object:
    return asyncio.run(
        run(
            targets,
            timeout=timeout,
            attempt_timeout=attempt_timeout,
            backoff=FAST,
            invert=invert,
            on_event=(events.append if events is not None else None),
        )
    )


def test_all_targets_are_awaited_until_ready(fake: MakeTarget) -> None:
    events: list[Event] = []
    results = wait([fake("a", DOWN, DOWN, UP), fake("b", UP)], events=events)
    assert [r.ready for r in results] == [True, True]  # type: ignore[attr-defined]
    assert BEHAVIOURS["a"].probes == 3
    assert BEHAVIOURS["b"].probes == 1
    kinds = [(e.type, e.target.host) for e in events]
    assert kinds.count((EventType.NOT_READY, "a")) == 2
    assert (EventType.READY, "b") in kinds
    assert all(b.closed == 1 for b in BEHAVIOURS.values())


def test_timeout_carries_each_targets_last_reason(fake: MakeTarget) -> None:
    events: list[Event] = []
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as info:
        wait([fake("a", DOWN), fake("b", UP)], timeout=0.3, events=events)
    assert 0.3 <= time.monotonic() - started < 1.5
    a, b = info.value.results
    assert (a.ready, a.reason, b.ready) == (False, "refused", True)
    assert "fake://a: refused" in str(info.value)
    assert events[-1].type is EventType.TIMED_OUT


def test_a_hanging_probe_cannot_carry_the_wait_past_its_deadline(fake: MakeTarget) -> None:
    started = time.monotonic()
    with pytest.raises(WaitTimeout) as info:
        wait([fake("a", "hang")], timeout=0.3, attempt_timeout=60)
    assert time.monotonic() - started < 1.0
    assert info.value.results[0].reason.startswith("timed out after 0.3s")
    assert BEHAVIOURS["a"].budgets == [pytest.approx(0.3, abs=0.05)]


def test_an_attempt_cut_short_by_the_deadline_keeps_the_last_reason(fake: MakeTarget) -> None:
    """Found by the HTTP tests: an attempt starting just before the deadline used to replace
    "connection refused" with "timed out after 0.0s" in the final report."""
    with pytest.raises(WaitTimeout) as info:
        wait([fake("a", DOWN, "hang")], timeout=0.3)
    assert info.value.results[0].reason == "refused"  # cut off by the deadline while hanging
    with pytest.raises(WaitTimeout) as info:
        wait([fake("b", DOWN, "late")], timeout=0.3)
    assert info.value.results[0].reason == "refused"  # answered once the deadline had passed


def test_an_inverted_wait_takes_no_answer_after_the_deadline_for_down(fake: MakeTarget) -> None:
    """Seen in CI: tcp --invert's connect, cut off at the deadline, said "timed out after 0.0s"
    and the port still open counted as closed."""
    with pytest.raises(WaitTimeout) as info:
        wait([fake("a", UP, "late")], timeout=0.3, invert=True)
    assert info.value.results[0].reason == "still up, up"


def test_an_inverted_attempt_cut_off_at_the_deadline_is_no_down(
    fake: MakeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a process stalled between an attempt's start and its budget (2 ms here, as the
    budget is taken: the first look at the time left) gave the attempt a deadline short of
    the wait's; cut off there, the hanging target counted as down."""
    from waitfor.core import runner

    real, looks = runner._Run.remaining, itertools.count()

    def stalled(self: runner._Run, now: float | None = None) -> float:
        if next(looks) == 0:
            time.sleep(0.002)
        return real(self, now)

    monkeypatch.setattr(runner._Run, "remaining", stalled)
    with pytest.raises(WaitTimeout):
        wait([fake("a", "hang")], timeout=0.1, invert=True)


def test_an_attempt_begun_after_the_deadline_says_no_attempt_finished(fake: MakeTarget) -> None:
    """A process starved of CPU for longer than its timeout (seen on a loaded machine) starts
    its first attempt after the deadline: that attempt did not hang for a negative time
    ("timed out after -5.9s" was said)."""
    timeout = 0.5
    with pytest.raises(WaitTimeout) as info:
        asyncio.run(
            run(
                [fake("a", "hang")],
                timeout=timeout,
                attempt_timeout=5,
                backoff=FAST,
                spent=timeout + 2,  # the loop ran 2 s after the deadline
            )
        )
    assert info.value.results[0].reason == "no attempt finished yet"


def test_each_attempt_is_bounded_by_the_attempt_timeout(fake: MakeTarget) -> None:
    events: list[Event] = []
    wait([fake("a", "hang", UP)], attempt_timeout=0.1, events=events)
    reasons = [e.reason for e in events if e.type is EventType.NOT_READY]
    assert reasons == ["timed out after 0.1s"]


def test_an_attempt_cut_off_late_says_the_attempt_timeout(fake: MakeTarget) -> None:
    """The event loop woken late (a loaded machine) ends the attempt after its time: the reason
    says the time it was given, as the checks' own timeouts do, not "0.6s" for 0.3 s."""
    events: list[Event] = []
    wait([fake("a", "stall", UP)], attempt_timeout=0.3, events=events)
    reasons = [e.reason for e in events if e.type is EventType.NOT_READY]
    assert reasons == ["timed out after 0.3s"]


def test_a_probes_own_timeout_says_how_long_it_took(fake: MakeTarget) -> None:
    """A probe's own TimeoutError (a step's bound) is not the attempt's: not "5.0s" for 0.05 s."""
    events: list[Event] = []
    wait([fake("a", "own timeout", UP)], attempt_timeout=5, events=events)
    [reason] = [e.reason for e in events if e.type is EventType.NOT_READY]
    took = float(reason.removeprefix("timed out after ").removesuffix("s"))
    assert took < 1.0, reason


def test_an_attempt_in_flight_at_the_deadline_past_its_own_says_its_own(
    fake: MakeTarget,
) -> None:
    """The loop woken late past the attempt's deadline and the wait's: the attempt waited its
    0.3 s, not until the wait's deadline (0.5 s)."""
    with pytest.raises(WaitTimeout) as info:
        wait([fake("a", "stall")], timeout=0.5, attempt_timeout=0.3)
    assert info.value.results[0].reason == "timed out after 0.3s"


def test_an_attempt_cut_off_says_what_it_waited_for(fake: MakeTarget) -> None:
    events: list[Event] = []
    wait([fake("a", "greeting", UP)], attempt_timeout=0.1, events=events)
    reasons = [e.reason for e in events if e.type is EventType.NOT_READY]
    assert reasons == ["no greeting after 0.1s"]
    with pytest.raises(WaitTimeout) as info:
        wait([fake("b", "greeting")], timeout=0.3, attempt_timeout=60)
    assert info.value.results[0].reason == "no greeting after 0.3s"


def test_a_hanging_attempt_puts_the_previous_reason_after_it_not_inside(
    fake: MakeTarget,
) -> None:
    """The previous reason may hold parentheses of its own: none are put around it."""
    with pytest.raises(WaitTimeout) as info:
        wait([fake("a", Outcome.down("HTTP 503 (expecting 200)"), "hang")], timeout=2.5)
    reason = info.value.results[0].reason
    assert reason.startswith("timed out after "), reason
    assert reason.endswith("s; previous attempt: HTTP 503 (expecting 200)"), reason


def test_a_watching_checks_backoff_counts_from_its_attempts_start(
    fake: MakeTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A check that watches (k8s:) for its whole attempt is tried again at once: a change
    landing between two watches would otherwise be seen a backoff delay late. One that fails
    at once still waits its backoff: the rate stays bounded."""
    slow = Backoff(initial=1.0, maximum=1.0, jitter=0.0)

    def gaps(target: Target, attempt_timeout: float) -> list[float]:
        events: list[Event] = []
        with pytest.raises(WaitTimeout):
            asyncio.run(
                run(
                    [target],
                    timeout=2.5,
                    attempt_timeout=attempt_timeout,
                    backoff=slow,
                    on_event=events.append,
                )
            )
        began = [e.elapsed for e in events if e.type is EventType.ATTEMPT]
        return [later - earlier for earlier, later in itertools.pairwise(began)]

    assert [round(gap) for gap in gaps(fake("plain", "hang"), 1.0)] == [2]  # watch, then sleep
    monkeypatch.setattr(FakeCheck, "WATCHES", True)
    assert [round(gap) for gap in gaps(fake("watching", "hang"), 1.0)][:2] == [1, 1]  # no sleep
    assert [round(gap) for gap in gaps(fake("failing", DOWN), 5)][:2] == [1, 1]  # its backoff
    # near the deadline attempts get short: they still wait their backoff, up to the deadline
    with pytest.raises(WaitTimeout):
        asyncio.run(run([fake("end", "half")], timeout=2.2, attempt_timeout=1.0, backoff=slow))
    assert BEHAVIOURS["end"].probes == 3  # at 0, 1 and 2 s; not a burst in the last 0.2 s


def test_permanent_failure_stops_everything(fake: MakeTarget) -> None:
    with pytest.raises(CheckFailed, match="fake://a: bad config"):
        wait([fake("a", Outcome.fatal("bad config")), fake("b", "hang")])
    assert BEHAVIOURS["b"].closed == 1


def test_invert_waits_until_down(fake: MakeTarget) -> None:
    events: list[Event] = []
    results = wait([fake("a", UP, UP, DOWN)], invert=True, events=events)
    assert results[0].ready  # type: ignore[index]
    assert [e.reason for e in events if e.type is EventType.NOT_READY] == ["still up, up"] * 2


def test_no_task_is_left_behind_after_cancellation(fake: MakeTarget) -> None:
    async def main() -> None:
        waiter = asyncio.create_task(
            run(
                [fake("a", "hang"), fake("b", DOWN)], timeout=None, attempt_timeout=60, backoff=FAST
            )
        )
        await asyncio.sleep(0.1)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert all(b.closed == 1 for b in BEHAVIOURS.values())
