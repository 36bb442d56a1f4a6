from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from waitfor.core.durations import parse_duration


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90),
        ("1.5", 1.5),
        ("90s", 90),
        ("500ms", 0.5),
        ("5m", 300),
        ("1h30m", 5400),
        (" 2M ", 120),
        ("0", 0),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "-1", "1e309", "nan", "inf", "5 m", "m", "1d", "1.s", "9999h"]
)
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|too long"):
        parse_duration(text)


@given(st.text(max_size=20))
def test_any_text_is_a_duration_or_a_value_error(text: str) -> None:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        message = str(exc)
        assert "\n" not in message
        return
    assert 0 <= seconds <= 7 * 24 * 3600


@pytest.mark.parametrize("text", ["9" * 5000, "1h" * 5000, "x" * 5000])
def test_a_long_bad_duration_is_quoted_cut(text: str) -> None:
    with pytest.raises(ValueError, match=r"duration|too long") as info:
        parse_duration(text)
    assert len(str(info.value)) < 120, str(info.value)
    assert str(info.value).startswith(repr(text[:40]) + "...")
