"""Targets a kind must refuse: one parametrized test from a table of (text, problem) rows."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest

from waitfor.core.targets import parse_target
from waitfor.errors import TargetError


def refusals(
    cases: Sequence[tuple[str, str]],
    *,
    address: str = "{}",
    regex: bool = True,
    hidden: Sequence[str] = (),
    one_line: bool = False,
) -> Callable[[str, str], None]:
    """A test (assign it to a ``test_`` name) that each row's text, put into ``address``, is
    refused with a message that names its problem (a regex, or a plain substring), shows none of
    the ``hidden`` strings and, with ``one_line``, is one line."""

    @pytest.mark.parametrize(("text", "problem"), cases)
    def test(text: str, problem: str) -> None:
        with pytest.raises(TargetError) as info:
            parse_target(address.format(text))
        message = str(info.value)
        assert re.search(problem, message) if regex else problem in message, message
        for secret in hidden:
            assert secret not in message
        if one_line:
            assert "\n" not in message

    return test
