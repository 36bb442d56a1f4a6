"""A scripted check kind for runner tests: no network, behaviour chosen per target host."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from waitfor.core.registry import KINDS, Kind
from waitfor.core.targets import Target
from waitfor.kind import Check, Deadline, Options, Outcome
from waitfor.net.activity import waiting_on


@dataclass
class Behaviour:
    """Outcomes to return in turn (the last repeats); "hang" awaits forever, "greeting" too but
    says it waits for a greeting, "late" answers after its budget has run out, "half" is not
    ready after half its budget, "stall" holds the event loop past its budget then hangs,
    "own timeout" raises TimeoutError of its own after 50 ms."""

    outcomes: list[Outcome | str]
    probes: int = 0
    closed: int = 0
    budgets: list[float] = field(default_factory=list)


BEHAVIOURS: dict[str, Behaviour] = {}


class FakeCheck(Check[Options]):
    @property
    def behaviour(self) -> Behaviour:
        return BEHAVIOURS[self.target.host]

    async def probe(self, deadline: Deadline) -> Outcome:
        b = self.behaviour
        b.budgets.append(deadline.budget)
        outcome = b.outcomes[min(b.probes, len(b.outcomes) - 1)]
        b.probes += 1
        if outcome == "hang":
            await asyncio.Event().wait()
        if outcome == "greeting":
            with waiting_on(lambda waited: f"no greeting after {waited:.1f}s"):
                await asyncio.Event().wait()
        if outcome == "half":  # watches for half its budget (a k8s: attempt), then not ready
            await asyncio.sleep(deadline.budget / 2)
            return Outcome.down("watched")
        if outcome == "stall":  # holds the event loop past its deadline, then hangs
            time.sleep(deadline.left() + 0.25)  # noqa: ASYNC251 - blocking is the point
            await asyncio.Event().wait()
        if outcome == "own timeout":  # a step's own bound, shorter than the attempt's
            await asyncio.sleep(0.05)
            raise TimeoutError
        if outcome == "late":  # answers only after its budget, blocking so nothing can cancel it
            time.sleep(deadline.left() + 0.02)  # noqa: ASYNC251 - blocking is the point
            return Outcome.down("late answer")
        assert isinstance(outcome, Outcome)
        return outcome

    async def aclose(self) -> None:
        self.behaviour.closed += 1


def fake_target(name: str, *outcomes: Outcome | str) -> Target:
    BEHAVIOURS[name] = Behaviour(list(outcomes))
    return Target("fake", "fake", f"fake://{name}", name, None, None, f"fake://{name}")


@contextmanager
def fake_kind(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Target]]:
    monkeypatch.setitem(KINDS, "fake", Kind("fake", ("fake",), "tests.support.fakes:FakeCheck"))
    BEHAVIOURS.clear()
    yield fake_target
