"""Running one exec: attempt: the command in a process group of its own, killed as a whole.

Separate from :mod:`.exec` so that parsing an ``exec:`` target imports no asyncio.

The process is started with :class:`subprocess.Popen` and watched with the event loop's readers
(its output, and a pidfd for its exit), not with asyncio's subprocess transports: a cancellation
that lands while ``loop.subprocess_exec`` is still connecting the pipes makes asyncio kill only
the direct child and then wait, unboundedly, for pipes that a grandchild still holds open, and
the wait would hang past its deadline. Here every step after the start is synchronous or a plain
awaitable, so a cancellation at any point still kills the whole group and closes everything.
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
from typing import TYPE_CHECKING

from waitfor.kind import Outcome

if TYPE_CHECKING:
    from waitfor.kind import Pattern

#: the reason quotes at most this much of the command's last line
LINE_LIMIT = 200
#: output kept from the end (the last line is all that is shown)
TAIL_BYTES = 4096
#: stdout kept from the start for a ``stdout=`` pattern
HEAD_BYTES = 64 * 1024
#: how long to drain the output after the process group is gone
DRAIN_SECONDS = 0.5
#: how often to look for the exit where pidfds are not available
POLL_SECONDS = 0.05
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: killed processes not yet reaped (a process in uninterruptible sleep dies late): retried later
_UNREAPED: list[subprocess.Popen[bytes]] = []


async def run_command(
    argv: Sequence[str], budget: float, stdout: Pattern | None = None, expected: int = 0
) -> Outcome:
    """Run once; ready when it exits ``expected`` and, given ``stdout``, the first HEAD_BYTES of
    its stdout match."""
    _UNREAPED[:] = [process for process in _UNREAPED if process.poll() is None]
    started = time.monotonic()
    try:
        # Starting is a fork and exec, milliseconds; see the module docstring for why not asyncio's.
        process = subprocess.Popen(  # noqa: ASYNC220
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            # apart only when stdout alone is matched: the reason's last line is either's
            stderr=subprocess.PIPE if stdout is not None else subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as one
        )
    except FileNotFoundError:
        return Outcome.down(f"command not found: {argv[0]}")
    except OSError as exc:
        return Outcome.down(f"cannot run {argv[0]}: {(exc.strerror or str(exc)).lower()}")
    watch = _Watch(process)
    timed_out = False
    try:
        try:
            async with asyncio.timeout(budget):
                await watch.exited.wait()
        except TimeoutError:
            timed_out = True
    finally:
        _kill_group(process.pid)
        try:
            # The output ends when the group is gone, unless a process that left the group
            # holds it: then do not wait for that.
            async with asyncio.timeout(DRAIN_SECONDS):
                await watch.closed.wait()
        except TimeoutError:
            pass
        finally:
            watch.close()
    line = last_line(bytes(watch.tail))
    said = f": {line}" if line else ""
    if timed_out:
        ran = time.monotonic() - started
        return Outcome.down(f"still running after {ran:.1f}s, killed{said}")
    code = process.returncode
    if code == expected and stdout is not None:
        if not await stdout.search(bytes(watch.head)):
            return Outcome.down(f"exit {code} but stdout does not match {stdout.pattern!r}{said}")
        return Outcome.up(f"exit {code}, stdout matches{said}")
    if code == expected:
        return Outcome.up(f"exit {code}{said}")
    wanted = f" (not {expected})" if expected else ""
    if code is not None and code < 0:
        return Outcome.down(f"killed by {signal_name(-code)}{wanted}{said}")
    return Outcome.down(f"exit {code}{wanted}{said}")


def signal_name(number: int) -> str:
    """``SIGTERM``; a real-time signal (no name of its own) as ``signal 40 (SIGRTMIN+6)``."""
    try:
        return signal.Signals(number).name
    except ValueError:
        pass
    low, high = getattr(signal, "SIGRTMIN", 0), getattr(signal, "SIGRTMAX", 0)
    if low < number < high:
        return f"signal {number} (SIGRTMIN+{number - low})"
    return f"signal {number}"


class _Watch:
    """Keeps the end of a process's output; tells when it exits and when its output ends."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self.loop = asyncio.get_running_loop()
        self.process = process
        self.tail = bytearray()
        self.head = bytearray()  # the first HEAD_BYTES of stdout
        self.exited = asyncio.Event()
        self.closed = asyncio.Event()
        self.output = process.stdout.fileno()
        self.open = {self.output}
        if process.stderr is not None:
            self.open.add(process.stderr.fileno())
        for fd in self.open:
            os.set_blocking(fd, False)
            self.loop.add_reader(fd, self._read, fd)
        self.poller: asyncio.TimerHandle | None = None
        self.pidfd: int | None = None
        try:
            self.pidfd = os.pidfd_open(process.pid)  # readable once the process has exited
        except (AttributeError, OSError):  # no pidfds (old kernel, not Linux): poll instead
            self.poller = self.loop.call_later(POLL_SECONDS, self._poll)
        else:
            self.loop.add_reader(self.pidfd, self._poll)

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.loop.remove_reader(fd)
            self.open.discard(fd)
            if not self.open:
                self.closed.set()
            return
        if fd == self.output and len(self.head) < HEAD_BYTES:
            self.head += data[: HEAD_BYTES - len(self.head)]
        self.tail += data
        del self.tail[:-TAIL_BYTES]

    def _poll(self) -> None:
        if self.process.poll() is not None:  # reaps it
            if self.pidfd is not None:
                self.loop.remove_reader(self.pidfd)
            self.exited.set()
        elif self.pidfd is None:
            self.poller = self.loop.call_later(POLL_SECONDS, self._poll)

    def close(self) -> None:
        """Stop watching and release everything; the group has been killed."""
        self.loop.remove_reader(self.output)
        if self.process.stderr is not None:
            self.loop.remove_reader(self.process.stderr.fileno())
            self.process.stderr.close()
        if self.poller is not None:
            self.poller.cancel()
        if self.pidfd is not None:
            self.loop.remove_reader(self.pidfd)
            os.close(self.pidfd)
        assert self.process.stdout is not None
        self.process.stdout.close()
        if self.process.poll() is None:
            try:
                self.process.wait(0.1)  # SIGKILLed: gone in microseconds, as a rule
            except subprocess.TimeoutExpired:
                _UNREAPED.append(self.process)


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def last_line(output: bytes) -> str:
    """The last non-blank line, printable and short."""
    lines = output.decode("utf-8", errors="replace").splitlines()
    line = next((text.strip() for text in reversed(lines) if text.strip()), "")
    line = _CONTROL.sub("", line)
    return line if len(line) <= LINE_LIMIT else line[: LINE_LIMIT - 1] + "…"
