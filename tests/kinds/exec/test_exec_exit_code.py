"""exec:...#exit-code=N: ready when the command exits N; the command's own status is the oracle."""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.command import ready_event, usage_error
from tests.support.fast import FAST
from tests.support.waiting import readiness
from waitfor import wait_for
from waitfor.core.targets import parse_target
from waitfor.errors import TargetError

COMMANDS = ["true", "false", "sh -c 'exit 3'", "sh -c 'exit 255'", "sh -c 'echo out; exit 7'"]


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("expected", [0, 1, 3, 7, 255])
def test_ready_exactly_when_the_command_exits_n(command: str, expected: int) -> None:
    status = subprocess.run(shlex.split(command), capture_output=True, check=False).returncode
    is_ready, reason = readiness(f"exec:{command}#exit-code={expected}")
    assert is_ready == (status == expected), reason
    assert reason.startswith(f"exit {status}")


def test_the_reasons_name_what_was_awaited() -> None:
    assert readiness("exec:sh -c 'echo migrating; exit 0'#exit-code=3") == (
        False,
        "exit 0 (not 3): migrating",
    )
    assert readiness("exec:sh -c 'echo done; exit 3'#exit-code=3") == (True, "exit 3: done")
    # without the option, 0 is awaited and the reason is as it always was
    assert readiness("exec:sh -c 'exit 3'") == (False, "exit 3")


def test_a_signal_is_not_an_exit_code() -> None:
    is_ready, reason = readiness("exec:sh -c 'kill -9 $$'#exit-code=137")
    assert not is_ready
    assert reason == "killed by SIGKILL (not 137)"


def test_with_stdout_both_must_hold() -> None:
    assert readiness("exec:sh -c 'echo green; exit 4'#exit-code=4&stdout=green")[0]
    said = readiness("exec:sh -c 'echo red; exit 4'#exit-code=4&stdout=green")
    assert said == (False, "exit 4 but stdout does not match 'green': red")
    assert readiness("exec:sh -c 'echo green'#exit-code=4&stdout=green") == (
        False,
        "exit 0 (not 4): green",
    )


def test_an_exit_code_that_changes_over_time(
    counting_script: Callable[[str], tuple[Path, Path]],
) -> None:
    script, counter = counting_script("exit $n")
    (result,) = wait_for(f"exec:sh {script}#exit-code=4", timeout=20, backoff=FAST)
    assert result.attempts == 4
    assert counter.read_text().strip() == "4"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("256", "exit-code must be a number from 0 to 255, not '256'"),
        ("-1", "not '-1'"),
        ("", "not ''"),
        ("0x1", "not '0x1'"),
        ("٣", "not '٣'"),  # an Arabic-Indic digit: str.isdigit() alone would take it
        ("1" * 400, "not '11111111111111111111'"),
    ],
)
def test_bad_values_are_one_line_errors(value: str, error: str) -> None:
    with pytest.raises(TargetError) as info:
        parse_target(f"exec:mysql -phunter2 -e 'select 1'#exit-code={value}")
    assert error in str(info.value)
    assert "hunter2" not in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(TargetError, match="given more than once"):
        parse_target("exec:true#exit-code=1&exit-code=2")


def test_the_cli_exit_2_and_json() -> None:
    assert "exit-code must be a number from 0 to 255" in usage_error("exec:true#exit-code=300")
    done = ready_event("exec:sh -c 'exit 5'#exit-code=5")
    assert done["target"] == "exec:sh -c 'exit 5'#exit-code=5"
    assert done["reason"] == "exit 5"
