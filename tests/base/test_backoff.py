from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waitfor.base.backoff import Backoff

backoffs = st.builds(
    Backoff,
    initial=st.floats(0, 10),
    multiplier=st.floats(1, 10),
    maximum=st.floats(0, 60),
    jitter=st.floats(0, 1),
)
attempts = st.integers(1, 10_000)
rands = st.floats(0, 1, exclude_max=True)


@given(backoffs, attempts, rands)
def test_delay_is_never_negative_nor_above_the_cap(b: Backoff, attempt: int, rand: float) -> None:
    assert 0 <= b.delay(attempt, rand) <= b.maximum


@given(
    backoffs,
    st.floats(0.001, 600),
    st.lists(st.tuples(st.floats(0, 5), rands), min_size=1, max_size=200),
)
def test_sleeps_never_carry_past_the_deadline(
    b: Backoff, timeout: float, attempts: list[tuple[float, float]]
) -> None:
    """Simulate a runner: attempts take some time (capped at what is left), then it sleeps."""
    now = 0.0
    for number, (duration, rand) in enumerate(attempts, start=1):
        now += min(duration, timeout - now)
        now += b.sleep_before_next(number, rand, timeout - now)
        assert now <= timeout + 1e-9  # float rounding of now + (timeout - now)
        if now >= timeout:
            break


def test_defaults_notice_fast_and_probe_at_most_twice_a_second() -> None:
    b = Backoff()
    first = [b.delay(n, 0.0) for n in range(1, 6)]
    assert first == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.6])
    steady = [b.delay(100, r) for r in (0.0, 0.5, 0.999)]
    assert all(0.5 <= d <= 0.6 for d in steady)  # <= 2 probes/s, noticed within ~0.6 s


@given(backoffs, attempts)
def test_jitter_spreads_delays(b: Backoff, attempt: int) -> None:
    assert b.delay(attempt, 0.9) <= b.delay(attempt, 0.1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial": -1},
        {"maximum": -1},
        {"multiplier": 0.5},
        {"jitter": 2},
        {"maximum": float("inf")},
        {"initial": float("nan")},
        {"initial": "1"},
    ],
)
def test_invalid_backoff(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="backoff"):
        Backoff(**kwargs)


def test_a_huge_multiplier_sits_at_the_cap() -> None:
    assert Backoff(multiplier=1e300).delay(100, 0.0) == Backoff().maximum
