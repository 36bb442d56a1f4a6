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


def assert_first_attempt_as_runner(ready: list[str], not_ready: list[str]) -> None:
    """probe_now (the cold-start path) gives probe's outcome for each ready target, else None."""
    for url in ready + not_ready:
        target = parse_target(url)
        check = check_class(target.scheme)(target)
        now = check.probe_now(Deadline.after(2.0))
        later = asyncio.run(check.probe(Deadline.after(2.0)))
        assert later.ready == (url in ready), later
        assert now == (later if later.ready else None), url
