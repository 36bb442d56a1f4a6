"""Reliability suites: lines they add to pytest's terminal summary (evidence, not just a pass)."""

from __future__ import annotations

import pytest

SUMMARY = pytest.StashKey[list[str]]()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for line in config.stash.get(SUMMARY, []):
        terminalreporter.write_line(line)
