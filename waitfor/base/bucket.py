"""A token bucket as a pure value: the caller says what time it is; nothing sleeps here.

``rate`` tokens a second are added continuously, at most ``burst`` saved; the bucket starts full.
Spending more than there is leaves a debt (negative tokens) that the refill pays first: the
byte budget of a wait's change lines (:mod:`waitfor.core.pacing`) and the Kubernetes client's
discovery rate limit (:class:`waitfor.net.k8s.client.Discovery`, which sleeps the debt off) are
both this.
"""

from __future__ import annotations


class TokenBucket:
    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = float(burst)
        self.at = 0.0  # the time the bucket was last filled up to

    def has(self, cost: float, now: float) -> bool:
        """Whether ``cost`` tokens could be spent now."""
        self._refill(now)
        return self.tokens >= cost

    def afford(self, cost: float, now: float) -> bool:
        """Spend ``cost`` tokens if there are that many."""
        if not self.has(cost, now):
            return False
        self.tokens -= cost
        return True

    def charge(self, cost: float, now: float) -> float:
        """Spend ``cost`` tokens whatever there is; the seconds until the debt is paid (0: none)."""
        self._refill(now)
        self.tokens -= cost
        return max(0.0, -self.tokens / self.rate) if self.rate > 0 else 0.0

    def _refill(self, now: float) -> None:
        if now > self.at:
            self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
            self.at = now
