"""Processes that are PID 1 in a PID namespace of their own, as waitfor is in a container."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def as_pid1(*args: str) -> Iterator[subprocess.Popen[str]]:
    """Python with ``args`` as PID 1 of a new PID namespace; all of it is ended afterwards."""
    root = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    with root:
        try:
            yield root
        finally:
            end_namespace(root)


def pid1_of(namespace_root: subprocess.Popen[str]) -> int:
    """The host PID of the process that is PID 1 inside (unshare's child)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        children = _children(namespace_root)
        if children:
            return children[0]
        time.sleep(0.05)
    raise AssertionError("no PID 1 appeared")


def end_namespace(namespace_root: subprocess.Popen[str]) -> None:
    """Kill the namespace's PID 1 (everything inside dies with it) and let unshare reap it:
    killing only unshare would leave its child running."""
    if namespace_root.poll() is None:
        for pid in _children(namespace_root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        try:
            namespace_root.wait(5)  # unshare reaps its child, then exits
        except subprocess.TimeoutExpired:
            namespace_root.kill()
    namespace_root.wait()


def _children(process: subprocess.Popen[str]) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]
