"""One attempt through a kind's real check, bounded as the runner bounds it."""

from __future__ import annotations

import asyncio

from waitfor import parse_target
from waitfor.checks import check_class
from waitfor.checks.base import Outcome


def probe(url: str, budget: float = 3.0) -> Outcome:
    """The outcome of one probe of ``url``, or "timed out after ..." once ``budget`` is spent."""
    target = parse_target(url)

    async def attempt() -> Outcome:
        try:
            async with asyncio.timeout(budget):
                return await check_class(target.scheme)(target).probe(budget)
        except TimeoutError:
            return Outcome.down(f"timed out after {budget:.1f}s")

    return asyncio.run(attempt())
