"""Fixtures of the exec kind's tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def counting_script(tmp_path: Path) -> Callable[[str], tuple[Path, Path]]:
    """``make(then)``: a shell script that counts its runs in a file (from 0) and then runs
    ``then`` with the count in ``$n``; returns (the script, the counter file)."""

    def make(then: str) -> tuple[Path, Path]:
        counter = tmp_path / "n"
        counter.write_text("0")
        script = tmp_path / "count.sh"
        script.write_text(f"n=$(($(cat {counter}) + 1)); echo $n > {counter}; {then}\n")
        return script, counter

    return make
