"""exec:...#stdout=RE2: ready when the command exits 0 and its stdout (first 64 KiB) matches."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from tests.support.command import usage_error
from tests.support.fast import FAST
from tests.support.targets import refusals
from tests.support.waiting import reason as reason_of
from waitfor import wait_for

reason = functools.partial(reason_of, timeout=0.5)


def test_exit_0_and_matching_stdout_is_ready() -> None:
    (result,) = wait_for("exec:echo 'status: green'#stdout=status:%20(green|yellow)", timeout=10)
    assert result.reason == "exit 0, stdout matches: status: green"


def test_exit_0_without_the_match_is_not_ready() -> None:
    said = reason("exec:echo 'status: red'#stdout=green")
    assert said == "exit 0 but stdout does not match 'green': status: red"


def test_a_match_with_a_failing_exit_is_not_ready() -> None:
    assert reason("exec:sh -c 'echo green; exit 3'#stdout=green") == "exit 3: green"


def test_only_stdout_counts_not_stderr() -> None:
    said = reason("exec:sh -c 'echo green >&2; echo red'#stdout=green")
    assert said.startswith("exit 0 but stdout does not match 'green'")


def test_only_the_first_64_kib_count(tmp_path: Path) -> None:
    script = tmp_path / "late.sh"
    script.write_text("head -c 70000 /dev/zero | tr '\\0' x; echo; echo READY\n")
    assert reason(f"exec:sh {script}#stdout=READY").startswith("exit 0 but stdout does not match")
    early = tmp_path / "early.sh"
    early.write_text("echo READY; head -c 200000 /dev/zero | tr '\\0' x; echo\n")
    assert wait_for(f"exec:sh {early}#stdout=(%3Fm)%5EREADY$", timeout=10)[0].ready


def test_output_that_changes_over_time(counting_script: Callable[[str], tuple[Path, Path]]) -> None:
    script, _ = counting_script('echo "replicas=$n"')
    (result,) = wait_for(f"exec:sh {script}#stdout=replicas=[3-9]", timeout=20, backoff=FAST)
    assert result.attempts >= 3


test_hostile_patterns_are_one_line_errors = refusals(
    [
        ("stdout=(a", "stdout regex '(a' is invalid"),
        ("stdout=(%3F=x)", "RE2 syntax"),
        ("stdout=a&stdout=b", "option 'stdout' given more than once"),
        ("stderr=x", "unknown option 'stderr' (known: exit-code, stdout)"),
        ("stdout=" + "(a|b)" * 3000, "is too large"),
    ],
    address="exec:mysql -phunter2 -e 'select 1'#{}",
    regex=False,
    hidden=["hunter2"],
)


def test_the_cli_with_a_bad_pattern_is_exit_2() -> None:
    assert "Traceback" not in usage_error("exec:true#stdout=%5C")
