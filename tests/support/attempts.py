"""One attempt through a kind's real check, bounded as the runner bounds it."""

from __future__ import annotations

import asyncio

from waitfor import parse_target
from waitfor.base.deadline import Deadline
from waitfor.core.registry import check_class
from waitfor.kind import Outcome


def probe(url: str, budget: float = 3.0) -> Outcome:
    """The outcome of one probe of ``url``, or "timed out after ..." once ``budget`` is spent."""
    target = parse_target(url)

    async def attempt() -> Outcome:
        try:
            async with asyncio.timeout(budget):
                return await check_class(target.scheme)(target).probe(Deadline.after(budget))
        except TimeoutError:
            return Outcome.down(f"timed out after {budget:.1f}s")

    return asyncio.run(attempt())


def quick_and_full(
    target: str, budget: float = 2.0, *, overrun: float | None = None
) -> tuple[Outcome | None, Outcome]:
    """(the quick attempt's answer, the full path's outcome), each on a fresh check of its kind.

    The full path is not bounded as the runner bounds it (a slow answer still gets its verdict);
    with ``overrun``, it is cancelled that long past its budget (TimeoutError: the test fails
    rather than waits on a stalled peer)."""
    parsed = parse_target(target)
    cls = check_class(parsed.scheme)
    quick = cls(parsed).probe_now(Deadline.after(budget))

    async def full() -> Outcome:
        check = cls(parse_target(target))
        try:
            async with asyncio.timeout(None if overrun is None else budget + overrun):
                return await check.probe(Deadline.after(budget))
        finally:
            await check.aclose()

    return quick, asyncio.run(full())


def assert_quick_agrees(quick: Outcome | None, full: Outcome) -> None:
    """The quick attempt may only step aside (None) or say the full path's ready outcome."""
    assert quick is None or (full.ready and quick == full), (quick, full)


def assert_first_attempt_as_runner(ready: list[str], not_ready: list[str]) -> None:
    """probe_now (the cold-start path) gives probe's outcome for each ready target, else None."""
    for url in ready + not_ready:
        target = parse_target(url)
        check = check_class(target.scheme)(target)
        now = check.probe_now(Deadline.after(2.0))
        later = asyncio.run(check.probe(Deadline.after(2.0)))
        assert later.ready == (url in ready), later
        assert now == (later if later.ready else None), url
