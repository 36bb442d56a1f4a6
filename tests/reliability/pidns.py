"""Processes that are PID 1 in a PID namespace of their own, as waitfor is in a container."""

from __future__ import annotations

import subprocess
import sys
import time


def as_pid1(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def pid1_of(namespace_root: subprocess.Popen[str]) -> int:
    """The host PID of the process that is PID 1 inside (unshare's child)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = subprocess.run(
            ["pgrep", "-P", str(namespace_root.pid)], capture_output=True, text=True
        ).stdout.split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError("no PID 1 appeared")
