"""A character that Unicode normalization (NFKC) turns into a URL delimiter (issue 23, item 2).

urlsplit refuses such an authority with a message that quotes it, password and all: every URL
kind must refuse it (or accept it) without showing the user information.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from waitfor import TargetError, parse_target
from waitfor.core.registry import KINDS

DELIMITERS = "＠／＃？℀：﹫"  # noqa: RUF001


def targets() -> list[str]:
    made = []
    for scheme in KINDS:
        # exec's URLs are its command's arguments
        prefix = "exec:cli mysql" if scheme == "exec" else scheme
        for char in DELIMITERS:
            made.append(f"{prefix}://app:Pa{char}ss9Zq@127.0.0.1:5432/db")
            made.append(f"{prefix}://app:ss9Zq@h{char}st:5432/db")  # in the host
    return made


@pytest.mark.parametrize("text", targets())
def test_no_userinfo_in_the_error_or_the_display(text: str) -> None:
    try:
        target = parse_target(text)
    except TargetError as exc:
        shown = str(exc)
    else:
        shown = f"{target} {target!r}"
    assert "ss9Zq" not in shown, shown


def test_the_cli_says_why_in_one_line() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "waitfor", "mysql://app:Pa／ss9Zq@127.0.0.1/db"],  # noqa: RUF001
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr == (
        "waitfor: error: invalid target 'mysql://***@127.0.0.1/db': the user, password or host "
        "holds a character that Unicode normalization (NFKC) turns into a delimiter (a fullwidth "
        "'@', '/', ':', '#' or '?', '℀'): percent-encode it\n"
    )
