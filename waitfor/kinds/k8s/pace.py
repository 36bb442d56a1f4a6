"""How soon the next list or watch may go to the API server: client-go's reflector backoff.

A watch the server ends at once (no body, a redirect, 410 Gone every time) or a list that fails
would otherwise be restarted at once, hundreds of times a second on a fresh TLS connection each.
client-go's reflector waits 0.8 s after the first failure, doubling to 30 s, each delay jittered
up (so waiters started together drift apart), and starts again from 0.8 s once the API server
has been healthy; a watch closed within a second counts as a failure ("very short watch"). A
429's Retry-After is a floor. The pace lives on the check, so it spans attempts.
"""

from __future__ import annotations

import random

from waitfor.kind import Backoff

#: client-go's: 0.8 s doubling to 30 s (its jitter is this module's: it lengthens a delay)
BACKOFF = Backoff(initial=0.8, maximum=30.0, jitter=0.0)
#: a watch the server closed sooner than this is a failure, as client-go's "very short watch"
SHORT_WATCH = 1.0


class Pace:
    def __init__(self, rand: random.Random | None = None) -> None:
        self._rand = rand or random.Random()
        self.failures = 0
        self.not_before = 0.0  # loop time before which nothing is sent

    def failed(self, now: float, at_least: float = 0.0) -> float:
        """A failure at ``now``: the delay before the next request (``at_least``: Retry-After)."""
        self.failures += 1
        base = BACKOFF.delay(self.failures, 0.0)
        delay = max(min(BACKOFF.maximum, base * (1.0 + self._rand.random())), at_least)
        self.not_before = now + delay
        return delay

    def healthy(self) -> None:
        """The server kept a watch open (or listed after a pause): back to the first delay."""
        self.failures = 0
