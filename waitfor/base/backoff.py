"""Exponential backoff with jitter as a pure value: no clock, no sleeping, no hidden randomness.

Defaults, and why:

- ``initial=0.05`` s, doubling: a dependency that is almost up (a port a second away from
  listening) is noticed within tens of milliseconds, without a burst: 0.05, 0.1, 0.2, 0.4, 0.6 ...
- ``maximum=0.6`` s with ``jitter=1/6``: once a dependency has been down a while the delay settles
  between 0.5 and 0.6 s, so it is noticed about half a second after it comes up (0.3 s on
  average) while each target sends at most 2 probes per second. The jitter only ever *shortens*
  a delay, so the cap is a hard bound, and waiters started together (a Deployment rollout) drift
  apart instead of probing in lockstep.

The runner's delays are not the only ones: the Kubernetes client's (the reflector's pace between
lists and watches, discovery's look again for a type not found) are this value with numbers of
their own, which is why it sits at the bottom layer, below net/.
"""

from __future__ import annotations

import math

from waitfor.base.values import Value

#: the least delay a wait may use (the CLI's --max-interval floor, and the library's): below it
#: a target down is probed thousands of times a second
MIN_DELAY = 0.01


class Backoff(Value):
    """The delays between attempts (see the module's docstring for the defaults)."""

    initial: float = 0.05
    multiplier: float = 2.0
    maximum: float = 0.6
    jitter: float = 1 / 6  # a delay is shortened by up to this fraction

    def _validate(self) -> None:
        for name in ("initial", "multiplier", "maximum", "jitter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"backoff {name} must be a number, not {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"backoff {name} must be finite, not {value!r}")
        if not (self.initial >= 0 and self.maximum >= 0 and self.multiplier >= 1):
            raise ValueError("backoff needs initial >= 0, maximum >= 0 and multiplier >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("backoff jitter must be between 0 and 1")

    def delay(self, attempt: int, rand: float) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based); ``rand`` is in [0, 1)."""
        exponent = min(max(attempt - 1, 0), 64)  # large attempts just sit at the cap
        try:
            grown = self.initial * self.multiplier**exponent
        except OverflowError:  # a huge multiplier: the cap it was heading for
            grown = self.maximum
        base = min(self.maximum, grown)
        return base * (1 - self.jitter * rand)

    def sleep_before_next(self, attempt: int, rand: float, remaining: float) -> float:
        """The delay, cut short so that it never carries the caller past its deadline."""
        return max(0.0, min(self.delay(attempt, rand), remaining))


#: no waiting between attempts: for tests of things other than waiting
IMMEDIATE = Backoff(initial=0.0, maximum=0.0, jitter=0.0)
