"""Targets a kind must refuse: one parametrized test from a table of (text, problem) rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from waitfor.core.targets import parse_target
from waitfor.errors import TargetError


def refusals(cases: Sequence[tuple[str, str]]) -> Callable[[str, str], None]:
    """A test (assign it to a ``test_`` name) that every text is refused with its problem."""

    @pytest.mark.parametrize(("text", "problem"), cases)
    def test(text: str, problem: str) -> None:
        with pytest.raises(TargetError, match=problem):
            parse_target(text)

    return test
