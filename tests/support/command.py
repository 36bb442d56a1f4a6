"""The command run as users run it: ``python -m waitfor`` in a fresh interpreter."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def waitfor(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30, clean: bool = False
) -> subprocess.CompletedProcess[str]:
    """``waitfor ARGS``, its output captured, in :func:`environment`."""
    return subprocess.run(
        [sys.executable, "-m", "waitfor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment(env, clean),
    )


def environment(env: dict[str, str] | None, clean: bool) -> dict[str, str]:
    """This process's environment with ``env`` added; ``clean`` first takes out the WAITFOR_
    variables a developer may have set."""
    base = {k: v for k, v in os.environ.items() if not (clean and k.startswith("WAITFOR_"))}
    return {**base, **(env or {})}


def usage_error(*args: str, **kw: Any) -> str:
    """``waitfor ARGS`` (as :func:`waitfor` runs it) refused as a usage error: exit 2 and one
    line on stderr, which it returns."""
    result = waitfor(*args, **kw)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def ready_event(*args: str, hidden: Sequence[str] = (), **kw: Any) -> dict[str, Any]:
    """The one "ready" event of ``waitfor -o json ARGS``, which exits 0 and shows none of the
    ``hidden`` strings."""
    result = waitfor("-o", "json", *args, **kw)
    assert result.returncode == 0, result.stderr
    for secret in hidden:
        assert secret not in result.stderr
    events: list[dict[str, Any]] = [json.loads(line) for line in result.stderr.splitlines()]
    (done,) = [event for event in events if event["event"] == "ready"]
    return done


def run_timed(
    command: list[str], env: dict[str, str], timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    """``command`` run to its end, and the seconds from its first line on stderr (waitfor's
    "waiting for ..." as its deadline starts) to its exit: a deadline held is judged from
    there, so an interpreter slow to start on a loaded machine does not count against it."""
    began = time.monotonic()
    first: list[float] = []
    err: list[str] = []
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        errors = proc.stderr

        def read_stderr() -> None:
            for line in errors:
                if not first:
                    first.append(time.monotonic())
                err.append(line)

        reader = threading.Thread(target=read_stderr, daemon=True)
        reader.start()
        try:
            out = proc.stdout.read()
            proc.wait(timeout=max(0.0, timeout - (time.monotonic() - began)))
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        reader.join()
        ended = time.monotonic()
    done = subprocess.CompletedProcess(command, proc.returncode, out, "".join(err))
    return done, ended - (first[0] if first else began)


def until_said(
    text: str, *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """``waitfor ARGS`` (as :func:`waitfor` runs it, ``clean``) until a line on stderr holds
    ``text``, then SIGTERM: a reason tested without waiting out a deadline a starved interpreter
    may miss. Never said within ``timeout``: killed, and the test fails on its exit code."""
    with subprocess.Popen(
        [sys.executable, "-m", "waitfor", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(env, clean=True),
    ) as proc:
        assert proc.stderr is not None
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        lines = []
        try:
            for line in proc.stderr:
                lines.append(line)
                if text in line:
                    proc.send_signal(signal.SIGTERM)
            proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:  # the test was interrupted
                proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, "", "".join(lines))


def together(*calls: Callable[[], T]) -> list[T]:
    """Each call's result, the calls made at once on threads of their own: runs that wait out
    a deadline side by side cost the wall time of one (they hardly use the CPU meanwhile)."""
    with ThreadPoolExecutor(len(calls)) as pool:
        return [future.result() for future in [pool.submit(call) for call in calls]]
