"""An attempt's deadline: one value from the runner down to the last socket call.

The runner makes one per attempt and enforces it (``asyncio.timeout_at(deadline.at)``); a probe
and the networking calls it makes read what is left from the same value, so every layer works
to the same instant instead of turning a float budget back into a deadline of its own.
"""

from __future__ import annotations

import time

from waitfor.base.values import Value


class Deadline(Value):
    """When an attempt must be over, on ``time.monotonic()``'s clock (the event loop's too)."""

    at: float
    budget: float  # the attempt's whole length, for reasons ("timed out after 5.0s")

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self) -> float:
        """Seconds until the deadline, 0 once it has passed."""
        return max(self.at - time.monotonic(), 0.0)

    def within(self, seconds: float) -> Deadline:
        """A deadline at most ``seconds`` from now, never past this one (one step's share)."""
        return Deadline(min(self.at, time.monotonic() + seconds), min(seconds, self.budget))
