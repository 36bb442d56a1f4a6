"""The token bucket: a full start, a continuous refill capped at the burst, and debts."""

from __future__ import annotations

import pytest

from waitfor.base.bucket import TokenBucket


def test_starts_full_and_refills_up_to_the_burst() -> None:
    bucket = TokenBucket(rate=10.0, burst=5)
    assert bucket.afford(5, now=0.0)
    assert not bucket.afford(1, now=0.0)
    assert not bucket.has(2, now=0.1)  # 1 token back after 0.1 s
    assert bucket.has(1, now=0.1)
    assert bucket.tokens == pytest.approx(1.0)
    bucket.has(0, now=100.0)
    assert bucket.tokens == 5  # never more than the burst


def test_a_charge_beyond_the_tokens_is_a_debt_paid_first() -> None:
    bucket = TokenBucket(rate=2.0, burst=1)
    assert bucket.charge(1, now=10.0) == 0.0
    assert bucket.charge(1, now=10.0) == pytest.approx(0.5)  # a turn further down the queue
    assert bucket.charge(1, now=10.0) == pytest.approx(1.0)
    assert not bucket.has(1, now=11.0)  # the debt of 2 is paid by 11 s, nothing saved yet
    assert bucket.has(1, now=11.5)


def test_time_going_back_adds_nothing() -> None:
    bucket = TokenBucket(rate=1.0, burst=3)
    bucket.charge(3, now=5.0)
    assert not bucket.has(1, now=4.0)
    assert bucket.tokens == 0
