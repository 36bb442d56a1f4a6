"""Running one exec: attempt: the command in a process group of its own, killed as a whole.

Separate from :mod:`.exec` so that parsing an ``exec:`` target imports no asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence

from waitfor.checks.base import Outcome

#: the reason quotes at most this much of the command's last line
LINE_LIMIT = 200
#: output kept from the end (the last line is all that is shown)
TAIL_BYTES = 4096
#: how long to drain the output after the process group is gone
DRAIN_SECONDS = 0.5
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


async def run_command(argv: Sequence[str], budget: float) -> Outcome:
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    try:
        transport, process = await loop.subprocess_exec(
            _Process,
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as one
        )
    except FileNotFoundError:
        return Outcome.down(f"command not found: {argv[0]}")
    except OSError as exc:
        return Outcome.down(f"cannot run {argv[0]}: {(exc.strerror or str(exc)).lower()}")
    timed_out = False
    try:
        try:
            async with asyncio.timeout(budget):
                await process.exited.wait()
        except TimeoutError:
            timed_out = True
    finally:
        _kill_group(transport.get_pid())
        try:
            # The output ends when the group is gone, unless a process that left the group
            # holds it: then do not wait for that.
            async with asyncio.timeout(DRAIN_SECONDS):
                await process.closed.wait()
        except TimeoutError:
            pass
        finally:
            transport.close()
    line = last_line(bytes(process.tail))
    said = f": {line}" if line else ""
    if timed_out:
        ran = time.monotonic() - started
        return Outcome.down(f"still running after {ran:.1f}s, killed{said}")
    code = transport.get_returncode()
    if code == 0:
        return Outcome.up(f"exit 0{said}")
    if code is not None and code < 0:
        return Outcome.down(f"killed by {signal.Signals(-code).name}{said}")
    return Outcome.down(f"exit {code}{said}")


class _Process(asyncio.SubprocessProtocol):
    """Keeps the end of the output; tells when the process exits and when its output ends.

    (``asyncio.subprocess.Process.wait`` waits for the output to end as well, so a background
    child holding it would look like the command still running.)
    """

    def __init__(self) -> None:
        self.tail = bytearray()
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes | bytearray) -> None:
        self.tail += data
        del self.tail[:-TAIL_BYTES]

    def process_exited(self) -> None:
        self.exited.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def last_line(output: bytes) -> str:
    """The last non-blank line, printable and short."""
    lines = output.decode("utf-8", errors="replace").splitlines()
    line = next((text.strip() for text in reversed(lines) if text.strip()), "")
    line = _CONTROL.sub("", line)
    return line if len(line) <= LINE_LIMIT else line[: LINE_LIMIT - 1] + "…"
